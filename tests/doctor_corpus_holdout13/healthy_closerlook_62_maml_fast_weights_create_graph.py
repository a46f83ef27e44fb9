# Source: https://github.com/wyharveychen/CloserLookFewShot/issues/62
#   code: methods/maml.py (MAML.set_forward with fast weights and
#   torch.autograd.grad(create_graph=True), set_forward_loss, train_loop over n_task tasks)
#   and backbone.py (Linear_fw, Conv2d_fw, BatchNorm2d_fw, ConvBlock, ConvNet) at the
#   repository's last commit
# Adapted: CPU instead of .cuda(); Variable dropped and loss.data[0] written loss.item();
#   MetaTemplate reduced to what MAML uses (feature, feat_dim, n_way, n_support); Conv4 with
#   32 channels on random 3x28x28 episodes (5-way, 1 support and 4 query images per class)
#   instead of 64 channels on miniImageNet; 3 epochs of 24 episodes; no test loop.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Linear_fw(nn.Linear):
    def __init__(self, in_features, out_features):
        super(Linear_fw, self).__init__(in_features, out_features)
        self.weight.fast = None
        self.bias.fast = None

    def forward(self, x):
        if self.weight.fast is not None and self.bias.fast is not None:
            out = F.linear(x, self.weight.fast, self.bias.fast)
        else:
            out = super(Linear_fw, self).forward(x)
        return out


class Conv2d_fw(nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True):
        super(Conv2d_fw, self).__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias)
        self.weight.fast = None
        self.bias.fast = None

    def forward(self, x):
        if self.weight.fast is not None and self.bias.fast is not None:
            out = F.conv2d(x, self.weight.fast, self.bias.fast, stride=self.stride, padding=self.padding)
        else:
            out = super(Conv2d_fw, self).forward(x)
        return out


class BatchNorm2d_fw(nn.BatchNorm2d):
    def __init__(self, num_features):
        super(BatchNorm2d_fw, self).__init__(num_features)
        self.weight.fast = None
        self.bias.fast = None

    def forward(self, x):
        running_mean = torch.zeros(x.data.size()[1])
        running_var = torch.ones(x.data.size()[1])
        if self.weight.fast is not None and self.bias.fast is not None:
            out = F.batch_norm(x, running_mean, running_var, self.weight.fast, self.bias.fast, training=True, momentum=1)
        else:
            out = F.batch_norm(x, running_mean, running_var, self.weight, self.bias, training=True, momentum=1)
        return out


class ConvBlock(nn.Module):
    def __init__(self, indim, outdim, pool=True, padding=1):
        super(ConvBlock, self).__init__()
        layers = [Conv2d_fw(indim, outdim, 3, padding=padding), BatchNorm2d_fw(outdim), nn.ReLU(inplace=True)]
        if pool:
            layers.append(nn.MaxPool2d(2))
        self.trunk = nn.Sequential(*layers)

    def forward(self, x):
        return self.trunk(x)


class MAML(nn.Module):
    def __init__(self, n_way, n_support, approx=False):
        super(MAML, self).__init__()
        self.n_way, self.n_support = n_way, n_support
        self.feature = nn.Sequential(*[ConvBlock(3 if i == 0 else 32, 32) for i in range(4)], nn.Flatten())
        self.feat_dim = 32
        self.loss_fn = nn.CrossEntropyLoss()
        self.classifier = Linear_fw(self.feat_dim, n_way)
        self.classifier.bias.data.fill_(0)
        self.n_task = 4
        self.task_update_num = 5
        self.train_lr = 0.01
        self.approx = approx

    def forward(self, x):
        out = self.feature.forward(x)
        scores = self.classifier.forward(out)
        return scores

    def set_forward(self, x, is_feature=False):
        x_a_i = x[:, :self.n_support, :, :, :].contiguous().view(self.n_way * self.n_support, *x.size()[2:])
        x_b_i = x[:, self.n_support:, :, :, :].contiguous().view(self.n_way * self.n_query, *x.size()[2:])
        y_a_i = torch.from_numpy(np.repeat(range(self.n_way), self.n_support))
        fast_parameters = list(self.parameters())
        for weight in self.parameters():
            weight.fast = None
        self.zero_grad()
        for task_step in range(self.task_update_num):
            scores = self.forward(x_a_i)
            set_loss = self.loss_fn(scores, y_a_i)
            grad = torch.autograd.grad(set_loss, fast_parameters, create_graph=True)
            if self.approx:
                grad = [g.detach() for g in grad]
            fast_parameters = []
            for k, weight in enumerate(self.parameters()):
                if weight.fast is None:
                    weight.fast = weight - self.train_lr * grad[k]
                else:
                    weight.fast = weight.fast - self.train_lr * grad[k]
                fast_parameters.append(weight.fast)
        scores = self.forward(x_b_i)
        return scores

    def set_forward_loss(self, x):
        scores = self.set_forward(x, is_feature=False)
        y_b_i = torch.from_numpy(np.repeat(range(self.n_way), self.n_query))
        return self.loss_fn(scores, y_b_i)

    def train_loop(self, epoch, train_loader, optimizer):
        avg_loss = 0
        task_count = 0
        loss_all = []
        optimizer.zero_grad()
        for i, (x, _) in enumerate(train_loader):
            self.n_query = x.size(1) - self.n_support
            loss = self.set_forward_loss(x)
            avg_loss = avg_loss + loss.item()
            loss_all.append(loss)
            task_count += 1
            if task_count == self.n_task:
                loss_q = torch.stack(loss_all).sum(0)
                loss_q.backward()
                optimizer.step()
                task_count = 0
                loss_all = []
            optimizer.zero_grad()
        print('Epoch {:d} | Loss {:f}'.format(epoch, avg_loss / float(i + 1)))


torch.manual_seed(0)
model = MAML(n_way=5, n_support=1)
optimizer = torch.optim.Adam(model.parameters())
train_loader = [(torch.randn(5, 5, 3, 28, 28), None) for _ in range(24)]
for epoch in range(3):
    model.train_loop(epoch, train_loader, optimizer)
