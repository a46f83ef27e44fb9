# Source: https://github.com/pytorch/pytorch/issues/642
# Adapted: the posted script with the `while(True)` loop bounded to 150 iterations, a batch of
#   4x3x64x64 instead of 8x3x224x224, cpu instead of model.cuda() and data.cuda(),
#   Variable(...) kept as a plain tensor (Variable is a no-op since torch 0.4), the unused
#   torchvision import dropped, a print of the output's mean every 50 iterations added,
#   seeded.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(64, 3, kernel_size=3, padding=1)
    def forward(self, x):
        x = self.conv1(x)
        x, id1 = F.max_pool2d(x,kernel_size=2, stride=2,return_indices=True)
        x = F.max_unpool2d(x, id1, kernel_size=2, stride=2)
        x = self.conv2(x)
        return x

torch.manual_seed(0)
model = Net()

optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.5)

model.train()

batch_= np.zeros((4,3, 64, 64), dtype=float)
data = torch.Tensor(batch_)
for i in range(150):
    output = model(data)
    if i % 50 == 0:
        print(i, output.mean().item())
