# Source: https://github.com/CuriousAI/mean-teacher/issues/2
#   code: pytorch/main.py (create_model, update_ema_variables, train, accuracy),
#   pytorch/mean_teacher/losses.py and pytorch/mean_teacher/utils.py (AverageMeterSet) at commit 546348f
# Adapted: train(), update_ema_variables, softmax_mse_loss, accuracy and AverageMeterSet kept with
#   their names and structure, ported to current torch (Variable/volatile dropped, loss.data[0] ->
#   loss.item(), size_average=False -> reduction="sum", add_(1 - alpha, x) -> add_(x, alpha=1 - alpha),
#   view -> reshape in accuracy); the cifar ResNet/shake-shake model replaced by a small conv net, the
#   two-view CIFAR-10 loader by 30 random batches of 32 16x16 images with 8 labelled targets each
#   (NO_LABEL for the rest), DataParallel/.cuda() and the logging context dropped; single-output
#   model (logit_distance_cost < 0), mse consistency; two epochs; cpu, seeded.
import time
import types

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

NO_LABEL = -1
args = types.SimpleNamespace(lr=0.05, momentum=0.9, weight_decay=2e-4, ema_decay=0.999, consistency=100.0,
                             consistency_rampup=5, consistency_type="mse", logit_distance_cost=-1,
                             print_freq=10, epochs=2)
global_step = 0


class AverageMeterSet:
    def __init__(self):
        self.meters = {}

    def __getitem__(self, key):
        return self.meters[key]

    def update(self, name, value, n=1):
        if not name in self.meters:
            self.meters[name] = AverageMeter()
        self.meters[name].update(value, n)

    def averages(self, postfix='/avg'):
        return {name + postfix: meter.avg for name, meter in self.meters.items()}


class AverageMeter:
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


def softmax_mse_loss(input_logits, target_logits):
    assert input_logits.size() == target_logits.size()
    input_softmax = F.softmax(input_logits, dim=1)
    target_softmax = F.softmax(target_logits, dim=1)
    num_classes = input_logits.size()[1]
    return F.mse_loss(input_softmax, target_softmax, reduction="sum") / num_classes


def sigmoid_rampup(current, rampup_length):
    current = np.clip(current, 0.0, rampup_length)
    phase = 1.0 - current / rampup_length
    return float(np.exp(-5.0 * phase * phase))


def get_current_consistency_weight(epoch):
    return args.consistency * sigmoid_rampup(epoch, args.consistency_rampup)


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    labeled_minibatch_size = max(target.ne(NO_LABEL).sum(), 1e-8)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
        res.append(correct_k.mul_(100.0 / labeled_minibatch_size))
    return res


def create_model(ema=False):
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.LeakyReLU(0.1), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.LeakyReLU(0.1),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    if ema:
        for param in model.parameters():
            param.detach_()
    return model


def update_ema_variables(model, ema_model, alpha, global_step):
    alpha = min(1 - 1 / (global_step + 1), alpha)
    for ema_param, param in zip(ema_model.parameters(), model.parameters()):
        ema_param.data.mul_(alpha).add_(param.data, alpha=1 - alpha)


def train(train_loader, model, ema_model, optimizer, epoch):
    global global_step
    class_criterion = nn.CrossEntropyLoss(reduction="sum", ignore_index=NO_LABEL)
    consistency_criterion = softmax_mse_loss
    meters = AverageMeterSet()
    model.train()
    ema_model.train()
    end = time.time()
    for i, ((input, ema_input), target) in enumerate(train_loader):
        meters.update('data_time', time.time() - end)
        meters.update('lr', optimizer.param_groups[0]['lr'])
        minibatch_size = len(target)
        labeled_minibatch_size = target.data.ne(NO_LABEL).sum()
        assert labeled_minibatch_size > 0
        meters.update('labeled_minibatch_size', labeled_minibatch_size)

        ema_model_out = ema_model(ema_input)
        model_out = model(input)
        logit1 = model_out
        ema_logit = ema_model_out
        ema_logit = ema_logit.detach().data

        class_logit, cons_logit = logit1, logit1
        res_loss = 0
        class_loss = class_criterion(class_logit, target) / minibatch_size
        meters.update('class_loss', class_loss.item())
        ema_class_loss = class_criterion(ema_logit, target) / minibatch_size
        meters.update('ema_class_loss', ema_class_loss.item())

        consistency_weight = get_current_consistency_weight(epoch)
        meters.update('cons_weight', consistency_weight)
        consistency_loss = consistency_weight * consistency_criterion(cons_logit, ema_logit) / minibatch_size
        meters.update('cons_loss', consistency_loss.item())

        loss = class_loss + consistency_loss + res_loss
        assert not (np.isnan(loss.item()) or loss.item() > 1e5), 'Loss explosion: {}'.format(loss.item())
        meters.update('loss', loss.item())

        prec1, prec5 = accuracy(class_logit.data, target.data, topk=(1, 5))
        meters.update('top1', prec1[0], labeled_minibatch_size)
        meters.update('error1', 100. - prec1[0], labeled_minibatch_size)
        ema_prec1, ema_prec5 = accuracy(ema_logit.data, target.data, topk=(1, 5))
        meters.update('ema_top1', ema_prec1[0], labeled_minibatch_size)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        global_step += 1
        update_ema_variables(model, ema_model, args.ema_decay, global_step)

        meters.update('batch_time', time.time() - end)
        end = time.time()
        if i % args.print_freq == 0:
            print('Epoch: [{0}][{1}/{2}]\tClass {3:.4f}\tCons {4:.4f}\tPrec@1 {5:.3f}'.format(
                epoch, i, len(train_loader), meters['class_loss'].avg, meters['cons_loss'].avg,
                float(meters['top1'].avg)))


torch.manual_seed(0)
train_loader = []
for _ in range(30):
    x = torch.randn(32, 3, 16, 16)
    target = torch.randint(0, 10, (32,))
    target[8:] = NO_LABEL
    train_loader.append(((x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)), target))

model = create_model()
ema_model = create_model(ema=True)
optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                            weight_decay=args.weight_decay, nesterov=True)
for epoch in range(args.epochs):
    train(train_loader, model, ema_model, optimizer, epoch)
