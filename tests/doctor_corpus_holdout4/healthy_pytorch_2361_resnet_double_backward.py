# Source: https://github.com/pytorch/pytorch/issues/2361
# Adapted: torchvision's resnet50 replaced by a small residual network with the same stem,
#   bottleneck-free residual blocks, global pooling and fc; inputs of 8x3x64x64 instead of
#   8x3x224x224; 20 iterations as posted; .cuda() -> cpu; Variable(...) written as a plain
#   tensor with requires_grad=True (Variable is a no-op since torch 0.4); a print every 5
#   iterations added, seeded.
import torch
import torch.nn as nn
from torch.autograd import grad


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


torch.manual_seed(0)
model = ResNet()
for k in range(20):
    x   = torch.rand(8, 3, 64, 64, requires_grad=True)
    dx, = grad(model(x).sum(), x, create_graph=True)
    y = model(x + dx).sum()
    y.backward()
    if k % 5 == 0:
        print(k, y.item())
