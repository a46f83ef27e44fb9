# Source: https://github.com/pytorch/pytorch/issues/108334
# Adapted: ExampleDataset, the DataLoader and the loop kept as posted; torchvision's resnet18
#   replaced by a small residual network with the same stem and a residual stage; images of
#   random height and width in 96-160 instead of 666-999, 60 samples per epoch instead of
#   1000 and 2 epochs instead of 10; cuda -> cpu; the psutil RSS print replaced by the
#   output's shape every 20 batches, seeded.
import random
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader


class BasicBlock(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)


class ResNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(32), BasicBlock(32))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


class ExampleDataset(Dataset):
    def __init__(self):
        self.num_samples = 60

    def __len__(self):
        return self.num_samples

    def __getitem__(self, idx):
        h = random.randint(96, 160)
        w = random.randint(96, 160)
        tensor = torch.ones((3, h, w))
        return tensor


random.seed(0)
torch.manual_seed(0)
dataset = ExampleDataset()
data_loader = DataLoader(dataset, batch_size=1, num_workers=0)
model = ResNet().to('cpu')

for epoch in range(2):
    for i, tensor in enumerate(data_loader):
        tensor = tensor.to('cpu')
        output = model(tensor)
        if i % 20 == 0:
            print('epoch', epoch, 'batch', i, tuple(output.shape))
