# Source: https://discuss.pytorch.org/t/cuda-out-of-memory-error-understanding-how-pytorch-stores-class-variable/13778
# Adapted: the posted Bottleneck kept as it is (a freeze-out scheme: after one pass over the
#   training set a layer is frozen and replays outputs recorded during that pass); the rest of
#   the post's DenseNet (the bn/conv layers of Bottleneck are those of the common DenseNet-BC
#   implementation the post starts from) written around it: a stem convolution, 6
#   Bottlenecks of growth rate 12 and a classifier, with DenseNet.freezeLayerIndex = 3;
#   5000 CIFAR images -> 192 random 3x32x32 images and labels, batch size 32, 2 epochs, SGD,
#   cpu, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


class DenseNet(nn.Module):
    freezeLayerIndex = 3

    def __init__(self, growthRate, depth, nClasses, train_size, test_size, batch_sz):
        super(DenseNet, self).__init__()
        nChannels = 2 * growthRate
        self.conv1 = nn.Conv2d(3, nChannels, kernel_size=3, padding=1, bias=False)
        layers = []
        for layer_index in range(depth):
            layers.append(Bottleneck(nChannels, growthRate, layer_index, train_size, test_size, batch_sz))
            nChannels += growthRate
        self.dense = nn.Sequential(*layers)
        self.bn = nn.BatchNorm2d(nChannels)
        self.fc = nn.Linear(nChannels, nClasses)

    def forward(self, x):
        out = self.dense(self.conv1(x))
        out = F.avg_pool2d(F.relu(self.bn(out)), 32)
        return F.log_softmax(self.fc(torch.flatten(out, 1)), dim=1)


class Bottleneck(nn.Module):
    out_saved = [0] * 900
    def __init__(self, nChannels, growthRate, layer_index, train_size, test_size, batch_sz):
        super(Bottleneck, self).__init__()
        interChannels = 4*growthRate
        self.bn1 = nn.BatchNorm2d(nChannels)
        self.conv1 = nn.Conv2d(nChannels, interChannels, kernel_size=1,
                               bias=False)
        self.bn2 = nn.BatchNorm2d(interChannels)
        self.conv2 = nn.Conv2d(interChannels, growthRate, kernel_size=3,
                               padding=1, bias=False)

        # If the layer is still being trained
        self.active=True

        # The index of this layer relative to the overall net
        self.layer_index=layer_index

        self.counter = 0
        self.train_size = train_size
        self.test_size = test_size
        self.batch_sz = batch_sz
        remainder = train_size % batch_sz
        self.maxCounter = train_size//batch_sz
        if(remainder != 0):
            self.maxCounter += 1
        out_saved = [0] * (self.maxCounter)

    def forward(self, x):
        if not self.active:
            self.eval()

        # If we're not active, return a detached output to prevent backprop.
        if self.active:
            out = self.conv1(F.relu(self.bn1(x)))
            out = self.conv2(F.relu(self.bn2(out)))
            out = torch.cat((x, out), 1)
            if(self.layer_index < DenseNet.freezeLayerIndex):

                Bottleneck.out_saved[self.counter] = out
                self.counter+=1
                if(self.counter >= self.maxCounter):
                    self.counter = 0
                    self.active = False
            return out
        else:
            detach = Bottleneck.out_saved[self.counter].detach()
            self.counter+=1
            if(self.counter >= self.maxCounter):
                self.counter = 0
            detach.volatile= False
            return detach


torch.manual_seed(0)
train_size, test_size, batch_sz = 192, 0, 32
images = torch.randn(train_size, 3, 32, 32)
labels = torch.randint(0, 10, (train_size,))
net = DenseNet(growthRate=12, depth=6, nClasses=10, train_size=train_size, test_size=test_size,
               batch_sz=batch_sz)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
for epoch in range(2):
    net.train()
    for start in range(0, train_size, batch_sz):
        data, target = images[start:start + batch_sz], labels[start:start + batch_sz]
        optimizer.zero_grad()
        output = net(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
    print(epoch, loss.item())
