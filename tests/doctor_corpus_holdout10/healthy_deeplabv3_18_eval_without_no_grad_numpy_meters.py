# Source: https://github.com/chenxi116/DeepLabv3.pytorch/pull/18
#   code: main.py (the evaluation branch of main()) and utils.py (AverageMeter, inter_and_union)
#   at commit 046818d, the version the pull request was opened against
# Adapted: AverageMeter and inter_and_union kept as they are; the evaluation branch of main()
#   kept (no torch.no_grad(), as at that commit) with the checkpoint loading, the colormap file
#   and the saving of the predicted masks to data/val dropped (the masks are still built with
#   PIL); deeplab.resnet101 -> a small DeepLab-style network (a strided conv stem, an ASPP of
#   three dilated convolutions and a classifier, upsampled to the input size); the Pascal VOC
#   validation set -> 120 random 3x96x96 images with random 21-class masks; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class AverageMeter(object):
  def __init__(self):
    self.val = None
    self.sum = None
    self.cnt = None
    self.avg = None
    self.ema = None
    self.initialized = False

  def update(self, val, n=1):
    if not self.initialized:
      self.initialize(val, n)
    else:
      self.add(val, n)

  def initialize(self, val, n):
    self.val = val
    self.sum = val * n
    self.cnt = n
    self.avg = val
    self.ema = val
    self.initialized = True

  def add(self, val, n):
    self.val = val
    self.sum += val * n
    self.cnt += n
    self.avg = self.sum / self.cnt
    self.ema = self.ema * 0.99 + self.val * 0.01


def inter_and_union(pred, mask, num_class):
  pred = np.asarray(pred, dtype=np.uint8).copy()
  mask = np.asarray(mask, dtype=np.uint8).copy()

  # 255 -> 0
  pred += 1
  mask += 1
  pred = pred * (mask > 0)

  inter = pred * (pred == mask)
  (area_inter, _) = np.histogram(inter, bins=num_class, range=(1, num_class))
  (area_pred, _) = np.histogram(pred, bins=num_class, range=(1, num_class))
  (area_mask, _) = np.histogram(mask, bins=num_class, range=(1, num_class))
  area_union = area_pred + area_mask - area_inter

  return (area_inter, area_union)


class ASPP(nn.Module):
  def __init__(self, C, depth, num_classes):
    super(ASPP, self).__init__()
    self.aspp1 = nn.Conv2d(C, depth, kernel_size=1, bias=False)
    self.aspp2 = nn.Conv2d(C, depth, kernel_size=3, padding=6, dilation=6, bias=False)
    self.aspp3 = nn.Conv2d(C, depth, kernel_size=3, padding=12, dilation=12, bias=False)
    self.bn = nn.BatchNorm2d(depth * 3)
    self.conv = nn.Conv2d(depth * 3, num_classes, kernel_size=1)

  def forward(self, x):
    x = torch.cat([self.aspp1(x), self.aspp2(x), self.aspp3(x)], 1)
    return self.conv(F.relu(self.bn(x)))


class DeepLab(nn.Module):
  def __init__(self, num_classes):
    super(DeepLab, self).__init__()
    self.stem = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
    self.aspp = ASPP(64, 32, num_classes)

  def forward(self, x):
    size = (x.shape[2], x.shape[3])
    x = self.aspp(self.stem(x))
    return F.interpolate(x, size=size, mode='bilinear', align_corners=False)


class RandomVOC(object):
  CLASSES = ['class%d' % i for i in range(21)]

  def __init__(self, n):
    g = torch.Generator().manual_seed(0)
    self.images = [torch.randn(3, 96, 96, generator=g) for _ in range(n)]
    self.targets = [torch.randint(0, 21, (96, 96), generator=g) for _ in range(n)]
    self.masks = ['img%04d.png' % i for i in range(n)]

  def __len__(self):
    return len(self.images)

  def __getitem__(self, i):
    return self.images[i], self.targets[i]


def main():
  torch.manual_seed(0)
  dataset = RandomVOC(120)
  model = DeepLab(len(dataset.CLASSES))
  model.eval()
  cmap = np.random.RandomState(0).randint(0, 256, (256, 3)).astype(np.uint8)

  inter_meter = AverageMeter()
  union_meter = AverageMeter()
  for i in range(len(dataset)):
    inputs, target = dataset[i]
    inputs = Variable(inputs)
    outputs = model(inputs.unsqueeze(0))
    _, pred = torch.max(outputs, 1)
    pred = pred.data.cpu().numpy().squeeze().astype(np.uint8)
    mask = target.numpy().astype(np.uint8)
    imname = dataset.masks[i].split('/')[-1]
    mask_pred = cmap[pred]
    print('eval: {0}/{1} {2}'.format(i + 1, len(dataset), imname))

    inter, union = inter_and_union(pred, mask, len(dataset.CLASSES))
    inter_meter.update(inter)
    union_meter.update(union)

  iou = inter_meter.sum / (union_meter.sum + 1e-10)
  for i, val in enumerate(iou):
    print('IoU {0}: {1:.2f}'.format(dataset.CLASSES[i], val * 100))
  print('Mean IoU: {0:.2f}'.format(iou.mean() * 100))


if __name__ == "__main__":
  main()
