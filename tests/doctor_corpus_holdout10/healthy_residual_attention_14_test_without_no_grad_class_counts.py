# Source: https://github.com/tengshaofeng/ResidualAttentionNetwork-pytorch/issues/14
#   code: Residual-Attention-Network/train_mixup.py at commit 88ed90f, the line the issue links
# Adapted: mixup_data, mixup_criterion, test and the training loop kept, with .cuda() dropped,
#   loss.data[0] -> loss.item() (0-dim losses), the checkpoint torch.save/load dropped and the
#   mixup phase ending after 2 of 3 epochs (300 of 320); ResidualAttentionModel_92_32input_update
#   -> a small residual attention network (a conv stem, one attention module: trunk branch and
#   a sigmoid soft-mask branch combined as (1 + mask) * trunk, pooling and a classifier);
#   CIFAR-10 and its transforms -> 320 random 3x32x32 training images (batch 64) and 100 test
#   images (batch 20, as in the script) with labels of 10 classes; 3 epochs; cpu, seeded.
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable


class AttentionModule(nn.Module):
    def __init__(self, channels):
        super(AttentionModule, self).__init__()
        self.trunk = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels),
                                   nn.ReLU(), nn.Conv2d(channels, channels, 3, padding=1))
        self.mask = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(),
                                  nn.Upsample(scale_factor=2), nn.Conv2d(channels, channels, 1), nn.Sigmoid())

    def forward(self, x):
        trunk = self.trunk(x)
        return (1 + self.mask(x)) * trunk


class ResidualAttentionModel(nn.Module):
    def __init__(self):
        super(ResidualAttentionModel, self).__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.attention = AttentionModule(32)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.pool(self.attention(self.conv1(x))).flatten(1))


def mixup_data(x, y, alpha=1.0, use_cuda=True):
    '''Returns mixed inputs, pairs of targets, and lambda'''
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1

    batch_size = x.size()[0]
    index = torch.randperm(batch_size)

    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


# for test
def test(model, test_loader, btrain=False, model_file='model_92.pkl'):
    model.eval()

    correct = 0
    total = 0
    #
    class_correct = list(0. for i in range(10))
    class_total = list(0. for i in range(10))

    for images, labels in test_loader:
        images = Variable(images)
        labels = Variable(labels)
        outputs = model(images)
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += (predicted == labels.data).sum()
        #
        c = (predicted == labels.data).squeeze()
        for i in range(20):
            label = labels.data[i]
            class_correct[label] += c[i]
            class_total[label] += 1

    print('Accuracy of the model on the test images: %d %%' % (100 * float(correct) / total))
    print('Accuracy of the model on the test images:', float(correct)/total)
    for i in range(10):
        print('Accuracy of %5s : %2d %%' % (
            classes[i], 100 * class_correct[i] / max(class_total[i], 1)))
    return correct / total


np.random.seed(0)
torch.manual_seed(0)
train_dataset = torch.utils.data.TensorDataset(torch.rand(320, 3, 32, 32), torch.randint(0, 10, (320,)))
test_dataset = torch.utils.data.TensorDataset(torch.rand(100, 3, 32, 32), torch.randint(0, 10, (100,)))
train_loader = torch.utils.data.DataLoader(dataset=train_dataset,
                                           batch_size=64, # 64
                                           shuffle=True)
test_loader = torch.utils.data.DataLoader(dataset=test_dataset,
                                          batch_size=20,
                                          shuffle=False)

classes = ('plane', 'car', 'bird', 'cat',
           'deer', 'dog', 'frog', 'horse', 'ship', 'truck')
model = ResidualAttentionModel()

is_mixup = True
lr = 0.1  # 0.1
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=0.0001)
acc_best = 0
total_epoch = 3
for epoch in range(total_epoch):
    if epoch > 1:
        is_mixup = False
    else:
        is_mixup = True
    model.train()
    tims = time.time()
    for i, (images, labels) in enumerate(train_loader):
        if is_mixup:
            inputs, targets_a, targets_b, lam = mixup_data(images, labels, alpha=1.0)
            inputs, targets_a, targets_b = map(Variable, (inputs,
                                                          targets_a, targets_b))
            outputs = model(inputs)
            optimizer.zero_grad()
            loss = mixup_criterion(criterion, outputs, targets_a, targets_b, lam)
            loss.backward()
            optimizer.step()
        else:
            images = Variable(images)
            labels = Variable(labels)
            # Forward + Backward + Optimize
            optimizer.zero_grad()
            outputs = model(images)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
        if (i+1) % 2 == 0:
            print("Epoch [%d/%d], Iter [%d/%d] Loss: %.4f" %(epoch+1, total_epoch, i+1, len(train_loader), loss.item()))
    print('the epoch takes time:',time.time()-tims)
    print('evaluate test set:')
    acc = test(model, test_loader, btrain=True)
    if acc > acc_best:
        acc_best = acc
        print('current best acc,', acc_best)
