# Source: https://github.com/salesforce/corr_based_prediction/issues/1
#   code: main.py (test, train, train_fn), models.py (MLPLayer, CNN) and utils.py
#   (dim_permute, compute_l2_norm, correlation_reg) at f04a72f
# Adapted: the functions kept as they are (argparse -> a namespace with the defaults used,
#   arch 'cnn'; the pickle dumps of the curves and tqdm dropped; the VIB and input-noise
#   branches of CNN, unused, dropped); CNN's widths 200-800 -> 16-64 and its final
#   nn.AvgPool2d(x.size()[2]*2) -> nn.AvgPool2d(x.size()[2]) (twice the map size fails on
#   28x28 inputs); the colored-MNIST loaders -> DataLoaders over 512 training and 256 test
#   random 3x28x28 images of 10 classes, batch 64, 3 epochs; save_dir a temporary directory;
#   cpu, seeded.
import tempfile
from argparse import Namespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as utils
from torch.autograd import Variable


class MLPLayer(nn.Module):
    def __init__(self, dim_in=None, dim_out=None, bn=False, act=True, dropout=0., bias=True):
        super(MLPLayer, self).__init__()
        self.act = act
        layer = [nn.Linear(dim_in, dim_out, bias=bias)]
        if bn:
            layer.append(nn.BatchNorm1d(dim_out))
        self.layer = nn.Sequential(*layer)

    def forward(self, x):
        x = self.layer(x)
        if self.act:
            x = F.relu((x))
        return x


class CNN(nn.Module):
    def __init__(self, bn=False, affine=True, num_classes=10, bias=False, kernel_size=3):
        super(CNN, self).__init__()
        nhiddens = [16, 32, 48, 64]
        self.conv1 = nn.Conv2d(3, nhiddens[0], kernel_size, 1, bias=bias)
        self.bn1 = nn.BatchNorm2d(nhiddens[0], affine=affine) if bn else nn.Sequential()
        self.conv2 = nn.Conv2d(nhiddens[0], nhiddens[1], 3, 1, bias=bias)
        self.bn2 = nn.BatchNorm2d(nhiddens[1], affine=affine) if bn else nn.Sequential()
        self.conv3 = nn.Conv2d(nhiddens[1], nhiddens[2], 3, 1, bias=bias)
        self.bn3 = nn.BatchNorm2d(nhiddens[2], affine=affine) if bn else nn.Sequential()
        self.conv4 = nn.Conv2d(nhiddens[2], nhiddens[3], 3, 1, bias=bias)
        self.bn4 = nn.BatchNorm2d(nhiddens[3], affine=affine) if bn else nn.Sequential()
        self.fc = MLPLayer(nhiddens[3], num_classes, 'none', act=False, bias=bias)

    def forward(self, x, ret_hid=False, train=True):
        h = self.conv1(x)
        x = F.relu(self.bn1(h))
        x = F.max_pool2d(x, 2, 2)
        x = self.conv2(x)
        x = F.relu(self.bn2(x))
        x = self.conv3(x)
        x = F.relu(self.bn3(x))
        x = F.max_pool2d(x, 2, 2)
        x = self.conv4(x)
        x = F.relu(self.bn4(x))
        x = nn.AvgPool2d(*[x.size()[2]])(x)
        x = x.view(x.size()[0], -1)
        x = self.fc(x)
        if ret_hid:
            return x, h
        return x


def dim_permute(h):
    if len(h.size()) > 2:
        h = h.permute(1, 0, 2, 3).contiguous()
        h = h.view(h.size(0), -1)
    else:
        h = h.permute(1, 0).contiguous()
        h = h.view(h.size(0), -1)
    return h


def compute_l2_norm(h, subtract_mean=False):
    h = dim_permute(h)
    if subtract_mean:
        mn = (h).mean(dim=1, keepdim=True)
        h = h - mn
    l2_norm = (h**2).sum()
    return torch.sqrt(l2_norm)


def correlation_reg(hid, targets, within_class=True, subtract_mean=True):
    norm_fn = compute_l2_norm
    if within_class:
        uniq = np.unique(targets)
        reg_ = 0
        for u in uniq:
            idx = np.where(targets == u)[0]
            norm = norm_fn(hid[idx], subtract_mean=subtract_mean)
            reg_ += (norm)**2
    else:
        norm = norm_fn(hid, subtract_mean=subtract_mean)
        reg_ = (norm)**2
    return reg_


args = Namespace(beta=1, bn_eval=False, lr=0.001, wdecay=0.0001, epochs=3, validation=False,
                 save_dir=tempfile.mkdtemp())
torch.manual_seed(1111)
use_cuda = False
model0 = CNN(bn=False, affine=True, num_classes=10)
model = model0
params = list(model.parameters())
trainloader = utils.DataLoader(utils.TensorDataset(torch.rand(512, 3, 28, 28), torch.randint(0, 10, (512,))),
                               batch_size=64, shuffle=True)
testloader = utils.DataLoader(utils.TensorDataset(torch.rand(256, 3, 28, 28), torch.randint(0, 10, (256,))),
                              batch_size=64, shuffle=False)
criterion = nn.CrossEntropyLoss()


def test(loader, model, save=False, epoch=0):
    global best_acc, args
    model.eval()
    correct, total = 0, 0
    tot_iters = len(loader)
    for batch_idx in range(tot_iters):
        inputs, targets = next(iter(loader))
        with torch.no_grad():
            inputs, targets = Variable(inputs), Variable(targets)
            outputs = (model(inputs, train=False))
            _, predicted = torch.max(nn.Softmax(dim=1)(outputs).data, 1)
            total += targets.size(0)
            correct += predicted.eq(targets.data).cpu().sum()
    acc = 100.*float(correct)/float(total)
    if save and acc > best_acc:
        best_acc = acc
        state = {'model': model0, 'epoch': epoch}
        with open(args.save_dir + '/best_model.pt', 'wb') as f:
            torch.save(state, f)
    return acc


def train(epoch):
    global trainloader, optimizer, args, model, best_loss
    model.train()
    correct = 0
    total = 0
    total_loss, tot_regularization_loss = 0, 0

    optimizer.zero_grad()
    tot_iters = len(trainloader)
    for batch_idx in range(tot_iters):
        inputs, targets = next(iter(trainloader))
        inputs = Variable(inputs)
        outputs, hid_repr = (model(inputs, ret_hid=True))
        loss = criterion(outputs, targets)
        regularization_loss = 0
        regularization_loss = correlation_reg(hid_repr, targets.cpu().numpy())
        tot_regularization_loss = tot_regularization_loss + regularization_loss.data
        total_loss_ = loss + args.beta * regularization_loss
        total_loss_.backward()
        total_loss += loss.data.cpu()
        _, predicted = torch.max(nn.Softmax(dim=1)(outputs).data, 1)
        total += targets.size(0)
        correct += predicted.eq(targets.data).cpu().sum()
        optimizer.step()
        optimizer.zero_grad()
    acc = 100.*correct/total
    return total_loss/(batch_idx+1), acc, tot_regularization_loss/(batch_idx+1)


optimizer = torch.optim.Adam(params, lr=args.lr, weight_decay=args.wdecay)
best_acc, best_loss = 0, np.inf
train_loss_list, train_acc_list, valid_acc_list, test_acc_list, reg_loss_list = [], [], [], [], []
epoch = 0
while epoch < args.epochs:
    epoch += 1
    loss, train_acc, regularization_loss = train(epoch)
    train_loss_list.append(loss)
    train_acc_list.append(train_acc)
    reg_loss_list.append(regularization_loss)
    test_acc = test(testloader, model=model, save=True, epoch=epoch)
    test_acc_list.append(test_acc)
    print('Epoch {}/{} | Loss {:3.4f} | acc {:3.2f} | test-acc {:3.2f} | reg_loss : {:3.4f}'.format(
        epoch, args.epochs, loss, train_acc, test_acc, regularization_loss))
