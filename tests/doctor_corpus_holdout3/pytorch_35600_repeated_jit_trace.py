# Source: https://github.com/pytorch/pytorch/issues/35600
# Adapted: torchvision's resnet18 replaced by a small conv net (torchvision is not installed),
#   sample input 2x3x48x64 instead of 2x3x480x640, 100 traces instead of 1000, psutil's
#   memory_full_info replaced by the RSS read from /proc/self/statm (psutil is not
#   installed), a print every 25 iterations, cpu, seeded.
import os

import torch
import torch.nn as nn


def resnet18_like():
    return nn.Sequential(
        nn.Conv2d(3, 16, 7, stride=2, padding=3), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 1000))


def rss():
    with open("/proc/%d/statm" % os.getpid()) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


torch.manual_seed(0)
with torch.no_grad():

    #Create a simple resnet
    model = resnet18_like()
    model.eval

    #Create sample input
    sample_input = torch.randn(size=[2, 3, 48, 64], requires_grad=False)

    #Repeat tracing
    for i in range(0, 100):
        tr_model = torch.jit.trace(model, sample_input, check_trace=False)
        if i % 25 == 0:
            print("Iter: {} = rss {}".format(i, rss()))
