# Source: https://github.com/pytorch/pytorch/issues/3824
# Adapted: torchvision's resnet50 replaced by a small conv net (torchvision is not installed),
#   the reporter's second variant (`y = dx.mean()` instead of `y = model(x + dx).sum()`) kept,
#   input 8x3x32x32 instead of 224x224, 30 iterations instead of 20, Variable dropped, cpu,
#   seeded, the loss printed every 10 iterations.
import torch
import torch.nn as nn
from torch.autograd import grad

torch.manual_seed(0)


def resnet_like():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 1000))


model = resnet_like()
for k in range(30):
    x = torch.rand(8, 3, 32, 32, requires_grad=True)
    dx, = grad(model(x).sum(), x, create_graph=True)
    y = dx.mean()
    y.backward()
    if k % 10 == 0:
        print(k, y.item())
