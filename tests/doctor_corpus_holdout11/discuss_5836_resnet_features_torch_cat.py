# Source: https://discuss.pytorch.org/t/why-extracting-features-from-pictures-is-memory-demanding/5836
# Adapted: the posted loop kept as it is (Variable and the unused classifier assignment
#   included); resnet152 with pretrained weights replaced by a small untrained CNN with a 1000-way
#   fc, the picture DATASET by 60 random 3x64x64 images indexed like it (mydata[i][0]), 1000
#   pictures by 60, torch.save to an in-memory buffer; cpu, seeded.
import io

import torch
from torch import nn
from torch.autograd import Variable


class DATASET(object):
    def __init__(self, root, n=60):
        g = torch.Generator().manual_seed(0)
        self.images = [torch.rand(3, 64, 64, generator=g) for _ in range(n)]

    def __getitem__(self, index):
        return self.images[index], 0

    def __len__(self):
        return len(self.images)


class SmallResNet(nn.Module):
    def __init__(self):
        super(SmallResNet, self).__init__()
        self.conv = nn.Conv2d(3, 32, 3, padding=1)
        self.bn = nn.BatchNorm2d(32)
        self.relu = nn.ReLU()
        self.layer = nn.Sequential(nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                                   nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, 1000)

    def forward(self, x):
        x = self.avgpool(self.layer(self.relu(self.bn(self.conv(x)))))
        return self.fc(torch.flatten(x, 1))


torch.manual_seed(0)
mydata = DATASET('.')
model = SmallResNet()
new_classifier = nn.Sequential(*list(model.children())[:-1])
model.classifier = new_classifier

pos1 = model(Variable(mydata[0][0].view(1, 3, 64, 64)))
for index in range(1, 60):
    f = model(Variable(mydata[index][0].view(1, 3, 64, 64)))
    pos1 = torch.cat((pos1, f))

f = io.BytesIO()
torch.save(pos1, f)
print(pos1.shape)
