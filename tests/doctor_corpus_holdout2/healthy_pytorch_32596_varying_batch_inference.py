# Source: https://github.com/pytorch/pytorch/issues/32596
# Adapted: torchvision's resnext50_32x4d replaced by a small grouped-convolution network in the
#   same shape (conv stem, two grouped bottleneck blocks, pooled linear head), 64x64 images
#   instead of 224x224, batch sizes 2-8 instead of 10-30, 60 iterations instead of 100, the
#   reporter's comments about memory removed, seeded.
import torch
import random
from torch import nn

random.seed(0)
torch.manual_seed(0)

device = torch.device("cpu")


class Bottleneck(nn.Module):
    def __init__(self, channels, groups=8):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.conv3 = nn.Conv2d(channels, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + x)


def resnext_small():
    return nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                         nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1),
                         Bottleneck(64), Bottleneck(64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(64, 1000))


model = resnext_small().to(device)
_ = model.eval()

def predict():
    x = torch.zeros((random.randint(2, 8), 3, 64, 64)).float()

    print("batch size is:", x.shape[0])

    with torch.no_grad():
        y_pred = model(x)
        return y_pred.mean().item()

predictions = []
for i in range(60):
    y_pred = predict()
    predictions.append(y_pred)
