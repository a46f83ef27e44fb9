# Source: https://github.com/pytorch/pytorch/issues/7714
# Adapted: PreActResNet18 (from the reporter's models module) replaced by a small
#   pre-activation conv net; .cuda() -> cpu; batchsize 128 -> 16 and 100 -> 25 steps; a seed.
import torch
from torch import nn, autograd
from torch.autograd import Variable
import time


class PreActNet(nn.Module):
    def __init__(self, num_classes=10):
        super(PreActNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(64)
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x):
        out = self.conv1(x)
        out = self.conv2(torch.relu(self.bn2(out)))
        out = torch.relu(self.bn3(out))
        out = nn.functional.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


torch.manual_seed(0)
net = PreActNet()
opt = torch.optim.SGD(net.parameters(), 0.01, momentum=0.9, weight_decay=1e-4)
batchsize = 16

GP = True
start = time.time()

for i in range(25):
    x = torch.rand((batchsize, 3, 32, 32))
    y = torch.randint(0, 10, (batchsize,)).long()
    x, y = Variable(x, requires_grad=True), Variable(y)
    opt.zero_grad()
    preds = net(x)
    loss_c = nn.CrossEntropyLoss()(preds, y)

    if GP:
        grad = autograd.grad(loss_c, x, create_graph=True, retain_graph=True,
                             only_inputs=True)[0]
        loss_g = (grad ** 2).mean() * batchsize
        (loss_c + loss_g).backward()
    else:
        loss_c.backward()
    opt.step()

end = time.time()
print("{:.3f}s for each step".format((end-start)/25))
