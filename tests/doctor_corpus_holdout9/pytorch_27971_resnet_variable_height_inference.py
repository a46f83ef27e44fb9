# Source: https://github.com/pytorch/pytorch/issues/27971
#   code: the benchmark the issue describes (its gist is not stored with the report): inference
#   with a ResNet-34 on CPU, one core, under torch.set_grad_enabled(False), on images of a fixed
#   width and a variable height drawn from a long-tailed distribution, printing the heights'
#   statistics, the memory growth every 100 images and the time per image
# Adapted: resnet34 replaced by a small ResNet of BasicBlocks (torchvision is not installed);
#   the heights drawn from a log-normal distribution clipped to 64..768 pixels (the go
#   to 7680) at width 256; 600 images; memory read from /proc with resource as the gist's
#   ru_maxrss does not fall; argparse replaced by constants; cpu, seeded.
import resource
import time

import numpy as np
import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


def small_resnet(num_classes=1000):
    return nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1), BasicBlock(16, 16), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))


def rss_kb():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def main(n=600, width=256):
    print('torch', torch.__version__)
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    model = small_resnet()
    model.eval()

    rng = np.random.RandomState(0)
    heights = np.clip(rng.lognormal(mean=5.5, sigma=0.5, size=n), 64, 768).astype(int)
    print('heights: mean={:.0f}, p50={:.0f} p95={:.0f} max={}'.format(
        heights.mean(), np.percentile(heights, 50), np.percentile(heights, 95), heights.max()))

    initial_rss = rss_kb()
    times = []
    for i, height in enumerate(heights):
        x = torch.randn(1, 3, int(height), width)
        t0 = time.perf_counter()
        model(x)
        times.append(time.perf_counter() - t0)
        if i and i % 100 == 0:
            print('n={} memory growth (kb): {:,}'.format(i, rss_kb() - initial_rss))
    print('time: mean={:.3f} s, p50={:.3f} s, p95={:.3f} s'.format(
        np.mean(times), np.percentile(times, 50), np.percentile(times, 95)))
    print('memory (kb): {:,} initial, {:,} growth'.format(initial_rss, rss_kb() - initial_rss))


torch.manual_seed(0)
main()
