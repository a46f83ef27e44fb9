# Source: https://github.com/jhjacobsen/invertible-resnet/issues/15
#   code: train() and test() of models/utils_cifar.py (classification branch), which the issue
#   says computes the test pass without torch.no_grad() on inputs that require grad
# Adapted: the i-ResNet replaced by a small convolutional classifier returning (out, out_bij)
#   as the i-ResNet does; CIFAR-10 loaders replaced by lists of 20 training and 8 test batches
#   of 16 random 3x32x32 images; 3 epochs; args is a namespace with the used fields; the
#   visdom plots, density-estimation branch and checkpoint saving are dropped (test() keeps
#   its best-result bookkeeping); torch.autograd.Variable kept as the code has it; cpu, seeded.
import math
import sys
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable

criterion = nn.CrossEntropyLoss()


def learning_rate(init, epoch):
    optim_factor = 0
    if epoch > 160:
        optim_factor = 3
    elif epoch > 120:
        optim_factor = 2
    elif epoch > 60:
        optim_factor = 1
    return init * math.pow(0.2, optim_factor)


def update_lr(optimizer, lr):
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


class iResNetLike(nn.Module):
    def __init__(self, nClasses=10):
        super().__init__()
        self.stack = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ELU(),
                                   nn.Conv2d(32, 32, 3, padding=1), nn.ELU())
        self.logits = nn.Linear(32, nClasses)

    def forward(self, x):
        out_bij = self.stack(x)
        out = self.logits(out_bij.mean([2, 3]))
        return out, out_bij


def train(args, model, optimizer, epoch, trainloader):
    model.train()
    correct = 0
    total = 0
    lr = learning_rate(args.lr, epoch)
    update_lr(optimizer, lr)
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        optimizer.zero_grad()
        inputs, targets = Variable(inputs, requires_grad=True), Variable(targets)
        out, _ = model(inputs)
        loss = criterion(out, targets)
        loss.backward()
        optimizer.step()

        _, predicted = torch.max(out.data, 1)
        total += targets.size(0)
        correct += predicted.eq(targets.data).cpu().sum()
        sys.stdout.write('\r| Epoch [%3d/%3d] Iter[%3d/%3d]\t\tLoss: %.4f Acc@1: %.3f'
                         % (epoch, args.epochs, batch_idx + 1, len(trainloader), loss.data.item(),
                            100. * correct.type(torch.FloatTensor) / float(total)))
        sys.stdout.flush()


def test(best_result, args, model, epoch, testloader):
    model.eval()
    objective = 0.
    total = 0
    for batch_idx, (inputs, targets) in enumerate(testloader):
        inputs, targets = Variable(inputs, requires_grad=True), Variable(targets)
        out, out_bij = model(inputs)
        _, predicted = torch.max(out.data, 1)
        objective += predicted.eq(targets.data).sum().item()
        del out, out_bij, _, predicted

        total += targets.size(0)
        del inputs, targets

    objective = float(objective) / float(total)
    print("\n| Validation Epoch #%d\t\t\tobjective =  %.4f" % (epoch, objective), flush=True)
    if objective > best_result:
        best_result = objective
    return best_result


torch.manual_seed(0)
args = SimpleNamespace(lr=0.1, epochs=3)
model = iResNetLike()
optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
trainloader = [(torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))) for _ in range(20)]
testloader = [(torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))) for _ in range(8)]
best_objective = -math.inf
for epoch in range(1, 1 + args.epochs):
    train(args, model, optimizer, epoch, trainloader)
    best_objective = test(best_objective, args, model, epoch, testloader)
