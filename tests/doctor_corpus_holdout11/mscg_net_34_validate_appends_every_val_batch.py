# Source: https://github.com/samleoqh/MSCG-Net/issues/34
#   code: tools/train_R50.py (main's epoch loop, validate, update_ckpt), lib/loss/acw_loss.py (ACW_loss)
#   and lib/utils/measure.py (evaluate, AverageMeter) at c81c031^, the commit before the fix
# Adapted: validate, update_ckpt, ACW_loss, evaluate and AverageMeter kept as they were (.cuda(),
#   checkpoint saving, the visual snapshot branch (save_pred is False) and tensorboardX dropped;
#   sklearn's confusion_matrix written with numpy.bincount); the MSCG-Net (SCG-GCN over a ResNet-50)
#   replaced by a small conv net that returns (outputs, cost) in training as the original does;
#   Lookahead(Adam) by Adam; the Agriculture-Vision loaders by 10 training and 40 validation
#   batches of 4 random 4-band 128x128 tiles with 7-class masks, generated batch by batch like
#   the DataLoader; one epoch of training then the validation pass; cpu, seeded.
import random
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

train_args = types.SimpleNamespace(save_rate=0.1, nb_classes=7, print_freq=5, save_pred=False, best_record={})


def update_best_record(epoch, val_loss, acc, acc_cls, mean_iu, fwavacc, f1):
    print('[epoch %d], [val loss %.5f], [acc %.5f], [acc_cls %.5f], [mean_iu %.5f], [fwavacc %.5f], [f1 %.5f]' % (
        epoch, val_loss, acc, acc_cls, mean_iu, fwavacc, f1))
    if not train_args.best_record or mean_iu > train_args.best_record['mean_iu']:
        train_args.best_record = dict(epoch=epoch, val_loss=val_loss, mean_iu=mean_iu)
        return True
    return False


train_args.update_best_record = update_best_record


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


def confusion_matrix(lt, lp, labels):
    n = len(labels)
    keep = (lt < n) & (lp < n)
    return np.bincount(n * lt[keep] + lp[keep], minlength=n * n).reshape(n, n)


def evaluate(predictions, gts, num_classes):
    conmatrix = np.zeros((num_classes, num_classes))
    labels = np.arange(num_classes).tolist()
    for lp, lt in zip(predictions, gts):
        lp[lt == 255] = 255
        conmatrix += confusion_matrix(lt.flatten(), lp.flatten(), labels=labels)
    tp = np.diag(conmatrix)
    fp = conmatrix.sum(0) - tp
    fn = conmatrix.sum(1) - tp
    with np.errstate(divide='ignore', invalid='ignore'):
        precision, recall = tp / (tp + fp), tp / (tp + fn)
        f1_score = 2 * recall * precision / (recall + precision)
        acc = tp.sum() / conmatrix.sum()
        acc_cls = np.nanmean(tp / conmatrix.sum(axis=0))
        iu = tp / (tp + fp + fn)
        freq = conmatrix.sum(axis=0) / conmatrix.sum()
    return acc, acc_cls, np.nanmean(iu), (freq[freq > 0] * iu[freq > 0]).sum(), np.nanmean(f1_score)


class ACW_loss(nn.Module):
    def __init__(self, ini_weight=0, ini_iteration=0, eps=1e-5, ignore_index=255):
        super(ACW_loss, self).__init__()
        self.ignore_index = ignore_index
        self.weight = ini_weight
        self.itr = ini_iteration
        self.eps = eps

    def forward(self, prediction, target):
        pred = F.softmax(prediction, 1)
        one_hot_label, mask = self.encode_one_hot_label(pred, target)
        acw = self.adaptive_class_weight(pred, one_hot_label, mask)
        err = torch.pow((one_hot_label - pred), 2)
        pnc = err - ((1. - err + self.eps) / (1. + err + self.eps)).log()
        loss_pnc = torch.sum(acw * pnc, 1)
        intersection = 2 * torch.sum(pred * one_hot_label, dim=(0, 2, 3)) + self.eps
        union = pred + one_hot_label
        if mask is not None:
            union[mask] = 0
        union = torch.sum(union, dim=(0, 2, 3)) + self.eps
        dice = intersection / union
        return loss_pnc.mean() - dice.mean().log()

    def adaptive_class_weight(self, pred, one_hot_label, mask=None):
        self.itr += 1
        sum_class = torch.sum(one_hot_label, dim=(0, 2, 3))
        sum_norm = sum_class / sum_class.sum()
        self.weight = (self.weight * (self.itr - 1) + sum_norm) / self.itr
        mfb = self.weight.mean() / (self.weight + self.eps)
        mfb = mfb / mfb.sum()
        mfb = torch.clamp(mfb, min=0.001, max=1.0)
        acw = (1. + pred + one_hot_label) * mfb.unsqueeze(-1).unsqueeze(-1)
        if mask is not None:
            acw[mask] = 0
        return acw

    def encode_one_hot_label(self, pred, target):
        one_hot_label = pred.detach() * 0
        mask = (target == self.ignore_index)
        target = target.clone()
        target[mask] = 0
        one_hot_label.scatter_(1, target.unsqueeze(1), 1)
        mask = mask.unsqueeze(1).expand_as(one_hot_label)
        one_hot_label[mask] = 0
        return one_hot_label, mask


class SmallSegNet(nn.Module):
    def __init__(self, bands=4, classes=7, c=32):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(bands, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                                  nn.Conv2d(c, c, 3, padding=2, dilation=2), nn.ReLU(), nn.Conv2d(c, classes, 1))

    def forward(self, x):
        out = self.body(x)
        if self.training:
            return out, 0.01 * out.pow(2).mean()
        return out


def validate(net, val_set, val_loader, criterion, optimizer, epoch, new_ep):
    net.eval()
    val_loss = AverageMeter()
    inputs_all, gts_all, predictions_all = [], [], []
    with torch.no_grad():
        for vi, (inputs, gts) in enumerate(val_loader):
            N = inputs.size(0) * inputs.size(2) * inputs.size(3)
            outputs = net(inputs)
            val_loss.update(criterion(outputs, gts).item(), N)
            if random.random() > train_args.save_rate:
                inputs_all.append(None)
            else:
                inputs_all.append(inputs.data.squeeze(0).cpu())
            gts_all.append(gts.data.squeeze(0).cpu().numpy())
            predictions = outputs.data.max(1)[1].squeeze(1).squeeze(0).cpu().numpy()
            predictions_all.append(predictions)
    update_ckpt(net, optimizer, epoch, new_ep, val_loss, inputs_all, gts_all, predictions_all)
    net.train()
    return val_loss, inputs_all, gts_all, predictions_all


def update_ckpt(net, optimizer, epoch, new_ep, val_loss, inputs_all, gts_all, predictions_all):
    avg_loss = val_loss.avg
    acc, acc_cls, mean_iu, fwavacc, f1 = evaluate(predictions_all, gts_all, train_args.nb_classes)
    updated = train_args.update_best_record(epoch, avg_loss, acc, acc_cls, mean_iu, fwavacc, f1)
    val_visual = []
    snapshot_name = 'epoch_%d_loss_%.5f_acc_%.5f_acc-cls_%.5f_mean-iu_%.5f_fwavacc_%.5f_f1_%.5f_lr_%.10f' % (
        epoch, avg_loss, acc, acc_cls, mean_iu, fwavacc, f1, optimizer.param_groups[0]['lr'])
    if updated:
        print('snapshot', snapshot_name)


class TileLoader:
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        for _ in range(self.n):
            yield torch.randn(4, 4, 128, 128, generator=g), torch.randint(0, 7, (4, 128, 128), generator=g)


random.seed(0)
np.random.seed(0)
torch.manual_seed(0)
net = SmallSegNet()
train_loader, val_loader = TileLoader(10, 1), TileLoader(40, 2)
criterion = ACW_loss()
optimizer = torch.optim.Adam(net.parameters(), lr=1.5e-4 / np.sqrt(3), weight_decay=2e-5, amsgrad=True)
train_main_loss, aux_train_loss = AverageMeter(), AverageMeter()
for i, (inputs, labels) in enumerate(train_loader):
    N = inputs.size(0) * inputs.size(2) * inputs.size(3)
    optimizer.zero_grad()
    outputs, cost = net(inputs)
    main_loss = criterion(outputs, labels)
    loss = main_loss + cost
    loss.backward()
    optimizer.step()
    train_main_loss.update(main_loss.item(), N)
    aux_train_loss.update(cost.item(), inputs.size(0))
    if (i + 1) % train_args.print_freq == 0:
        print('[epoch 1], [iter %d / %d], [loss %.5f, aux %.5f]' % (i + 1, len(train_loader), train_main_loss.avg, aux_train_loss.avg))
validate(net, None, val_loader, criterion, optimizer, 1, 0)
