# Source: https://github.com/hszhao/semseg/issues/60
#   code: tool/train.py (validate) and util/util.py (AverageMeter, intersectionAndUnionGPU)
#   at commit 2338a13
# Adapted: PSPNet replaced by a small conv segmentation net (5 classes, 64x64 inputs); the
#   training epoch reduced to forward, loss, backward and SGD step; logging and the
#   distributed branches dropped; args from a Namespace; .cuda(non_blocking=True) -> cpu;
#   torch.histc fed float tensors (histc has no integer kernel on the CPU); 2 epochs of
#   8 training and 12 validation batches of 4.
import time
from argparse import Namespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


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


def intersectionAndUnionGPU(output, target, K, ignore_index=255):
    # 'K' classes, output and target sizes are N or N * L or N * H * W, each value in range 0 to K - 1.
    assert (output.dim() in [1, 2, 3])
    assert output.shape == target.shape
    output = output.view(-1)
    target = target.view(-1)
    output[target == ignore_index] = ignore_index
    intersection = output[output == target]
    area_intersection = torch.histc(intersection.float(), bins=K, min=0, max=K-1)
    area_output = torch.histc(output.float(), bins=K, min=0, max=K-1)
    area_target = torch.histc(target.float(), bins=K, min=0, max=K-1)
    area_union = area_output + area_target - area_intersection
    return area_intersection, area_union, area_target


class SegNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.Conv2d(64, classes, 1))

    def forward(self, x):
        return F.interpolate(self.body(x), size=x.shape[2:], mode='bilinear', align_corners=True)


def train(train_loader, model, criterion, optimizer, epoch):
    model.train()
    loss_meter = AverageMeter()
    for i, (input, target) in enumerate(train_loader):
        output = model(input)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_meter.update(loss.item(), input.size(0))
    return loss_meter.avg


def validate(val_loader, model, criterion):
    batch_time = AverageMeter()
    data_time = AverageMeter()
    loss_meter = AverageMeter()
    intersection_meter = AverageMeter()
    union_meter = AverageMeter()
    target_meter = AverageMeter()

    model.eval()
    end = time.time()
    for i, (input, target) in enumerate(val_loader):
        data_time.update(time.time() - end)
        output = model(input)
        if args.zoom_factor != 8:
            output = F.interpolate(output, size=target.size()[1:], mode='bilinear', align_corners=True)
        loss = criterion(output, target)

        n = input.size(0)
        loss = torch.mean(loss)

        output = output.max(1)[1]
        intersection, union, target = intersectionAndUnionGPU(output, target, args.classes, args.ignore_label)
        intersection, union, target = intersection.cpu().numpy(), union.cpu().numpy(), target.cpu().numpy()
        intersection_meter.update(intersection), union_meter.update(union), target_meter.update(target)

        accuracy = sum(intersection_meter.val) / (sum(target_meter.val) + 1e-10)
        loss_meter.update(loss.item(), input.size(0))
        batch_time.update(time.time() - end)
        end = time.time()
        if ((i + 1) % args.print_freq == 0):
            print('Test: [{}/{}] '
                  'Loss {loss_meter.val:.4f} ({loss_meter.avg:.4f}) '
                  'Accuracy {accuracy:.4f}.'.format(i + 1, len(val_loader),
                                                    loss_meter=loss_meter,
                                                    accuracy=accuracy))

    iou_class = intersection_meter.sum / (union_meter.sum + 1e-10)
    accuracy_class = intersection_meter.sum / (target_meter.sum + 1e-10)
    mIoU = np.mean(iou_class)
    mAcc = np.mean(accuracy_class)
    allAcc = sum(intersection_meter.sum) / (sum(target_meter.sum) + 1e-10)
    print('Val result: mIoU/mAcc/allAcc {:.4f}/{:.4f}/{:.4f}.'.format(mIoU, mAcc, allAcc))
    return loss_meter.avg, mIoU, mAcc, allAcc


def make_loader(n_batches, classes):
    return [(torch.randn(4, 3, 64, 64), torch.randint(0, classes, (4, 64, 64))) for _ in range(n_batches)]


args = Namespace(classes=5, ignore_label=255, zoom_factor=8, print_freq=4, epochs=2, base_lr=0.01)

if __name__ == '__main__':
    torch.manual_seed(123)
    model = SegNet(args.classes)
    criterion = nn.CrossEntropyLoss(ignore_index=args.ignore_label)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr, momentum=0.9)
    train_loader = make_loader(8, args.classes)
    val_loader = make_loader(12, args.classes)
    for epoch in range(args.epochs):
        loss_train = train(train_loader, model, criterion, optimizer, epoch)
        loss_val, mIoU_val, mAcc_val, allAcc_val = validate(val_loader, model, criterion)
        print('epoch', epoch + 1, 'train loss {:.4f} val loss {:.4f}'.format(loss_train, loss_val))
