# Source: https://github.com/mahyarnajibi/FreeAdversarialTraining/issues/10
#   code: main_free.py (train) and lib/utils.py (AverageMeter, accuracy, fgsm) at commit e185c84
# Adapted: train() kept as it was, without `.cuda()` (noise_batch stays the leaf that
#   requires grad, as it is on the GPU before `.cuda()`), with a small CNN instead of the
#   ResNet-50, 6 batches of 16 random 3x16x16 images and 10 classes as the loader, n_repeats=4,
#   2 epochs, the configs as a namespace and the log lines as prints every 2 batches; cpu, seeded.
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable


class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def fgsm(gradz, step_size):
    return step_size*torch.sign(gradz)


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


configs = SimpleNamespace(
    TRAIN=SimpleNamespace(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225], print_freq=2),
    DATA=SimpleNamespace(crop_size=16, batch_size=16, max_color_value=255.0),
    ADV=SimpleNamespace(n_repeats=4, fgsm_step=4.0 / 255.0, clip_eps=4.0 / 255.0))

global global_noise_data
global_noise_data = torch.zeros([configs.DATA.batch_size, 3, configs.DATA.crop_size, configs.DATA.crop_size])


def train(train_loader, model, criterion, optimizer, epoch):
    global global_noise_data
    mean = torch.Tensor(np.array(configs.TRAIN.mean)[:, np.newaxis, np.newaxis])
    mean = mean.expand(3, configs.DATA.crop_size, configs.DATA.crop_size)
    std = torch.Tensor(np.array(configs.TRAIN.std)[:, np.newaxis, np.newaxis])
    std = std.expand(3, configs.DATA.crop_size, configs.DATA.crop_size)
    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()
    top1 = AverageMeter()
    top5 = AverageMeter()
    model.train()
    for i, (input, target) in enumerate(train_loader):
        end = time.time()
        data_time.update(time.time() - end)
        for j in range(configs.ADV.n_repeats):
            noise_batch = Variable(global_noise_data[0:input.size(0)], requires_grad=True)
            in1 = input + noise_batch
            in1.clamp_(0, 1.0)
            in1.sub_(mean).div_(std)
            output = model(in1)
            loss = criterion(output, target)

            prec1, prec5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), input.size(0))
            top1.update(prec1[0], input.size(0))
            top5.update(prec5[0], input.size(0))

            optimizer.zero_grad()
            loss.backward()

            pert = fgsm(noise_batch.grad, configs.ADV.fgsm_step)
            global_noise_data[0:input.size(0)] += pert.data
            global_noise_data.clamp_(-configs.ADV.clip_eps, configs.ADV.clip_eps)

            optimizer.step()
            batch_time.update(time.time() - end)
            end = time.time()

            if i % configs.TRAIN.print_freq == 0:
                print('Train Epoch: [{0}][{1}/{2}]\t'
                      'Loss {cls_loss.val:.4f} ({cls_loss.avg:.4f})\t'
                      'Prec@1 {top1.val:.3f} ({top1.avg:.3f})'.format(
                       epoch, i, len(train_loader), top1=top1, cls_loss=losses))
                sys.stdout.flush()


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(32, 10))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
train_loader = [(torch.rand(16, 3, 16, 16), torch.randint(0, 10, (16,))) for _ in range(6)]
for epoch in range(2):
    train(train_loader, model, criterion, optimizer, epoch)
