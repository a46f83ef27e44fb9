# Source: https://github.com/pytorch/pytorch/issues/49401
# Adapted: validation() and train() kept as posted without the pdb breakpoints; torchvision's
#   resnet18 replaced by a small residual network with the same stem and a residual stage;
#   batch_size 16 instead of 1568, images of 48x48 instead of 64x64 and 12 iterations instead of 100 in each function; the
#   stored issue stops at the start of main (the save directory and the GPUs), completed as
#   the issue describes the run: build the network, then call train and validation in turn,
#   here for 3 rounds; the unused imports (tqdm, tensorboard, torchaudio) dropped; DEVICE is
#   cpu (no GPU), seeded.
import argparse

import torch
import torch.nn as nn

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


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


def validation(args, pr, net, device='cuda'):
    batch_size = 16
    net.eval()
    with torch.no_grad():
        for i in range(12):
            img = torch.rand(batch_size, 3, 48, 48).to(device)
            out = net(img)
    torch.cuda.empty_cache()
    return None

def train(args, pr, net, device='cuda'):
    net.train()
    batch_size = 16
    for i in range(12):
        img = torch.rand(batch_size, 3, 48, 48).to(device)
        out = net(img)
    torch.cuda.empty_cache()
    return None

def main(args, device):
    torch.manual_seed(0)
    net = ResNet().to(device)
    pr = None
    for round_ in range(3):
        train(args, pr, net, device=device)
        validation(args, pr, net, device=device)
        print('round', round_, 'done')


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    args = parser.parse_args([])
    main(args, DEVICE)
