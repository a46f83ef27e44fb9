# Source: https://github.com/timgaripov/swa/issues/21
#   code: utils.py (train_epoch, eval, moving_average, bn_update and the BN helpers) and the
#   epoch loop of train.py at commit 411b2fc
# Adapted: CPU instead of .cuda(async=True); torch.autograd.Variable dropped and
#   loss.data[0] written loss.item() (current PyTorch rejects both); CIFAR-10 replaced by
#   random 3x16x16 images (20 training and 5 test batches of 32), VGG16-BN by a small conv
#   net with batch norm; 8 epochs, swa_start 4, eval_freq 1; no checkpoints or tabulate.
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


def adjust_learning_rate(optimizer, lr):
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr
    return lr


def train_epoch(loader, model, criterion, optimizer):
    loss_sum = 0.0
    correct = 0.0
    model.train()
    for i, (input, target) in enumerate(loader):
        output = model(input)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_sum += loss.item() * input.size(0)
        pred = output.data.max(1, keepdim=True)[1]
        correct += pred.eq(target.data.view_as(pred)).sum().item()
    n = sum(len(t) for _, t in loader)
    return {'loss': loss_sum / n, 'accuracy': correct / n * 100.0}


def eval(loader, model, criterion):
    loss_sum = 0.0
    correct = 0.0
    model.eval()
    for i, (input, target) in enumerate(loader):
        output = model(input)
        loss = criterion(output, target)
        loss_sum += loss.item() * input.size(0)
        pred = output.data.max(1, keepdim=True)[1]
        correct += pred.eq(target.data.view_as(pred)).sum().item()
    n = sum(len(t) for _, t in loader)
    return {'loss': loss_sum / n, 'accuracy': correct / n * 100.0}


def moving_average(net1, net2, alpha=1):
    for param1, param2 in zip(net1.parameters(), net2.parameters()):
        param1.data *= (1.0 - alpha)
        param1.data += param2.data * alpha


def _check_bn(module, flag):
    if issubclass(module.__class__, torch.nn.modules.batchnorm._BatchNorm):
        flag[0] = True


def check_bn(model):
    flag = [False]
    model.apply(lambda module: _check_bn(module, flag))
    return flag[0]


def reset_bn(module):
    if issubclass(module.__class__, torch.nn.modules.batchnorm._BatchNorm):
        module.running_mean = torch.zeros_like(module.running_mean)
        module.running_var = torch.ones_like(module.running_var)


def _get_momenta(module, momenta):
    if issubclass(module.__class__, torch.nn.modules.batchnorm._BatchNorm):
        momenta[module] = module.momentum


def _set_momenta(module, momenta):
    if issubclass(module.__class__, torch.nn.modules.batchnorm._BatchNorm):
        module.momentum = momenta[module]


def bn_update(loader, model):
    if not check_bn(model):
        return
    model.train()
    momenta = {}
    model.apply(reset_bn)
    model.apply(lambda module: _get_momenta(module, momenta))
    n = 0
    for input, _ in loader:
        b = input.data.size(0)
        momentum = b / (n + b)
        for module in momenta.keys():
            module.momentum = momentum
        model(input)
        n += b
    model.apply(lambda module: _set_momenta(module, momenta))


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(64 * 4 * 4, 10))
swa_model = copy.deepcopy(model)
swa_n = 0
loaders = {'train': [(torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))) for _ in range(20)],
           'test': [(torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))) for _ in range(5)]}
criterion = F.cross_entropy
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
epochs, swa_start, swa_c_epochs = 8, 4, 1
for epoch in range(epochs):
    lr = 0.05 if epoch < swa_start else 0.01
    adjust_learning_rate(optimizer, lr)
    train_res = train_epoch(loaders['train'], model, criterion, optimizer)
    test_res = eval(loaders['test'], model, criterion)
    swa_res = {'loss': None, 'accuracy': None}
    if (epoch + 1) >= swa_start and (epoch + 1 - swa_start) % swa_c_epochs == 0:
        moving_average(swa_model, model, 1.0 / (swa_n + 1))
        swa_n += 1
        bn_update(loaders['train'], swa_model)
        swa_res = eval(loaders['test'], swa_model, criterion)
    print(epoch + 1, lr, round(train_res['loss'], 4), round(test_res['accuracy'], 2), swa_res['accuracy'])
