# Source: https://github.com/pytorch/pytorch/issues/40973
# Adapted: torchvision's resnet50 replaced by a small residual network with the same stem and
#   stages (conv-bn-relu, max pooling, residual blocks, global average pooling, fc), the
#   WIDER FACE validation images read with cv2 replaced by 100 random uint8 images of random
#   height and width (64-224 pixels, as photos of varying size), the file list by their
#   names; torch.set_grad_enabled(False), model.eval() and the cpu device kept, seeded.
import numpy as np
import torch
import torch.nn as nn


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
        self.layer3 = BasicBlock(32, 64, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


rng = np.random.RandomState(0)
torch.manual_seed(0)
test_dataset = ['%d--image_%04d.jpg' % (k % 10, k) for k in range(100)]


def imread(filename):
    h, w = rng.randint(64, 224), rng.randint(64, 224)
    return rng.randint(0, 256, (h, w, 3), dtype=np.uint8)


torch.set_grad_enabled(False)
model = ResNet()
model.eval()

device = torch.device('cpu')
model = model.to(device)

for i, filename in enumerate(test_dataset):
    if i % 20 == 0:
        print('{}/{}'.format(i, len(test_dataset)))
    img_raw = imread(filename)
    img = np.float32(img_raw)
    img = img.transpose(2, 0, 1)
    img = torch.from_numpy(img).unsqueeze(0)
    img = img.to(device)
    model(img)
