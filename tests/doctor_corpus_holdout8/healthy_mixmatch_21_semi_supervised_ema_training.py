# Source: https://github.com/YU1ut/MixMatch-pytorch/issues/21
#   code: train.py (train, validate, linear_rampup, SemiLoss, WeightEMA, interleave_offsets,
#   interleave) and utils' AverageMeter and accuracy at cc7ef42
# Adapted: the functions kept as they are, minus the progress bar (Bar) and the .cuda() calls;
#   labeled_train_iter.next() -> next(labeled_train_iter) (DataLoader iterators no longer have
#   .next()); main() reduced to the epoch loop (train, then validate on the validation set with
#   the EMA model), without logger, tensorboard and checkpoints; WRN-28-2 -> a small
#   convolutional network with batch norm and 10 classes; CIFAR-10 -> DataLoaders over 96
#   labeled and 96 unlabeled random 3x32x32 images (the unlabeled ones as two noisy views) and
#   64 validation images, batch 16, train_iteration 12, 3 epochs (linear_rampup over 3);
#   cpu, seeded.
import random
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data

args = SimpleNamespace(epochs=3, batch_size=16, lr=0.002, train_iteration=12, alpha=0.75, lambda_u=75, T=0.5,
                       ema_decay=0.999)


class AverageMeter(object):
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

def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res

def train(labeled_trainloader, unlabeled_trainloader, model, optimizer, ema_optimizer, criterion, epoch, use_cuda):

    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()
    losses_x = AverageMeter()
    losses_u = AverageMeter()
    ws = AverageMeter()
    end = time.time()
    labeled_train_iter = iter(labeled_trainloader)
    unlabeled_train_iter = iter(unlabeled_trainloader)
    model.train()
    for batch_idx in range(args.train_iteration):
        try:
            inputs_x, targets_x = next(labeled_train_iter)
        except:
            labeled_train_iter = iter(labeled_trainloader)
            inputs_x, targets_x = next(labeled_train_iter)
        try:
            (inputs_u, inputs_u2), _ = next(unlabeled_train_iter)
        except:
            unlabeled_train_iter = iter(unlabeled_trainloader)
            (inputs_u, inputs_u2), _ = next(unlabeled_train_iter)
        data_time.update(time.time() - end)
        batch_size = inputs_x.size(0)
        targets_x = torch.zeros(batch_size, 10).scatter_(1, targets_x.view(-1,1).long(), 1)
        with torch.no_grad():
            outputs_u = model(inputs_u)
            outputs_u2 = model(inputs_u2)
            p = (torch.softmax(outputs_u, dim=1) + torch.softmax(outputs_u2, dim=1)) / 2
            pt = p**(1/args.T)
            targets_u = pt / pt.sum(dim=1, keepdim=True)
            targets_u = targets_u.detach()
        all_inputs = torch.cat([inputs_x, inputs_u, inputs_u2], dim=0)
        all_targets = torch.cat([targets_x, targets_u, targets_u], dim=0)
        l = np.random.beta(args.alpha, args.alpha)
        l = max(l, 1-l)
        idx = torch.randperm(all_inputs.size(0))
        input_a, input_b = all_inputs, all_inputs[idx]
        target_a, target_b = all_targets, all_targets[idx]
        mixed_input = l * input_a + (1 - l) * input_b
        mixed_target = l * target_a + (1 - l) * target_b
        mixed_input = list(torch.split(mixed_input, batch_size))
        mixed_input = interleave(mixed_input, batch_size)
        logits = [model(mixed_input[0])]
        for input in mixed_input[1:]:
            logits.append(model(input))
        logits = interleave(logits, batch_size)
        logits_x = logits[0]
        logits_u = torch.cat(logits[1:], dim=0)
        Lx, Lu, w = criterion(logits_x, mixed_target[:batch_size], logits_u, mixed_target[batch_size:], epoch+batch_idx/args.train_iteration)
        loss = Lx + w * Lu
        losses.update(loss.item(), inputs_x.size(0))
        losses_x.update(Lx.item(), inputs_x.size(0))
        losses_u.update(Lu.item(), inputs_x.size(0))
        ws.update(w, inputs_x.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ema_optimizer.step()
        batch_time.update(time.time() - end)
        end = time.time()
    return (losses.avg, losses_x.avg, losses_u.avg,)

def validate(valloader, model, criterion, epoch, use_cuda, mode):
    losses = AverageMeter()
    top1 = AverageMeter()
    top5 = AverageMeter()
    model.eval()
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(valloader):
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            prec1, prec5 = accuracy(outputs, targets, topk=(1, 5))
            losses.update(loss.item(), inputs.size(0))
            top1.update(prec1.item(), inputs.size(0))
            top5.update(prec5.item(), inputs.size(0))
    return (losses.avg, top1.avg)

def linear_rampup(current, rampup_length=args.epochs):
    if rampup_length == 0:
        return 1.0
    else:
        current = np.clip(current / rampup_length, 0.0, 1.0)
        return float(current)

class SemiLoss(object):
    def __call__(self, outputs_x, targets_x, outputs_u, targets_u, epoch):
        probs_u = torch.softmax(outputs_u, dim=1)
        Lx = -torch.mean(torch.sum(F.log_softmax(outputs_x, dim=1) * targets_x, dim=1))
        Lu = torch.mean((probs_u - targets_u)**2)
        return Lx, Lu, args.lambda_u * linear_rampup(epoch)

class WeightEMA(object):
    def __init__(self, model, ema_model, alpha=0.999):
        self.model = model
        self.ema_model = ema_model
        self.alpha = alpha
        self.params = list(model.state_dict().values())
        self.ema_params = list(ema_model.state_dict().values())
        self.wd = 0.02 * args.lr
        for param, ema_param in zip(self.params, self.ema_params):
            param.data.copy_(ema_param.data)
    def step(self):
        one_minus_alpha = 1.0 - self.alpha
        for param, ema_param in zip(self.params, self.ema_params):
            if ema_param.dtype==torch.float32:
                ema_param.mul_(self.alpha)
                ema_param.add_(param * one_minus_alpha)
                param.mul_(1 - self.wd)

def interleave_offsets(batch, nu):
    groups = [batch // (nu + 1)] * (nu + 1)
    for x in range(batch - sum(groups)):
        groups[-x - 1] += 1
    offsets = [0]
    for g in groups:
        offsets.append(offsets[-1] + g)
    assert offsets[-1] == batch
    return offsets

def interleave(xy, batch):
    nu = len(xy) - 1
    offsets = interleave_offsets(batch, nu)
    xy = [[v[offsets[p]:offsets[p + 1]] for p in range(nu + 1)] for v in xy]
    for i in range(1, nu + 1):
        xy[0][i], xy[i][i] = xy[i][i], xy[0][i]
    return [torch.cat(v, dim=0) for v in xy]

def create_model(ema=False):
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    if ema:
        for param in model.parameters():
            param.detach_()
    return model

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)
images = torch.rand(96, 3, 32, 32)
labeled_set = data.TensorDataset(images, torch.randint(0, 10, (96,)))
unlabeled_images = torch.rand(96, 3, 32, 32)
unlabeled_set = data.TensorDataset(torch.stack([unlabeled_images + 0.05 * torch.randn_like(unlabeled_images),
                                                unlabeled_images + 0.05 * torch.randn_like(unlabeled_images)], 1),
                                   torch.zeros(96, dtype=torch.long))
unlabeled_set = [((x[0], x[1]), y) for x, y in unlabeled_set]
labeled_trainloader = data.DataLoader(labeled_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
unlabeled_trainloader = data.DataLoader(unlabeled_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
val_loader = data.DataLoader(data.TensorDataset(torch.rand(64, 3, 32, 32), torch.randint(0, 10, (64,))),
                             batch_size=args.batch_size, shuffle=False)
model = create_model()
ema_model = create_model(ema=True)
train_criterion = SemiLoss()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
ema_optimizer = WeightEMA(model, ema_model, alpha=args.ema_decay)
for epoch in range(args.epochs):
    train_loss, train_loss_x, train_loss_u = train(labeled_trainloader, unlabeled_trainloader, model, optimizer,
                                                   ema_optimizer, train_criterion, epoch, False)
    val_loss, val_acc = validate(val_loader, ema_model, criterion, epoch, False, mode='Valid Stats')
    print(epoch, train_loss, train_loss_x, train_loss_u, val_loss, val_acc)
