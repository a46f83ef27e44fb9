# Source: https://github.com/pytorch/pytorch/issues/101921
# Adapted: the posted FullyConvNet kept as it is (comments translated away); the stored issue
#   stops inside forward after the second block, so forward is completed in the same pattern
#   (conv3 block, then fc1 and fc2 checkpointed with relu and fc3), and the loop the title
#   describes is written around it: batches of 2 images whose height and width are drawn at
#   random (32-160 pixels) as OCR inputs of different sizes, a per-pixel cross-entropy loss,
#   backward and an SGD step, 150 iterations; checkpoint is called with use_reentrant=False
#   (current PyTorch asks for it); cpu, seeded.
import random

import torch
from torch import nn
import torch.utils.checkpoint as cp

if __name__ == '__main__':
    class FullyConvNet(nn.Module):
        def __init__(self):
            super(FullyConvNet, self).__init__()

            self.conv1 = nn.Conv2d(in_channels=3, out_channels=16, kernel_size=3, padding=1)
            self.conv2 = nn.Conv2d(in_channels=16, out_channels=32, kernel_size=3, padding=1)
            self.conv3 = nn.Conv2d(in_channels=32, out_channels=64, kernel_size=3, padding=1)

            self.fc1 = nn.Conv2d(in_channels=64, out_channels=128, kernel_size=3, padding=1)
            self.fc2 = nn.Conv2d(in_channels=128, out_channels=256, kernel_size=3, padding=1)
            self.fc3 = nn.Conv2d(in_channels=256, out_channels=2, kernel_size=3, padding=1)

        def forward(self, x):
            x = cp.checkpoint(self.conv1, x, use_reentrant=False)
            x = nn.functional.relu(x, inplace=True)
            x = nn.functional.max_pool2d(x, 2)

            x = cp.checkpoint(self.conv2, x, use_reentrant=False)
            x = nn.functional.relu(x, inplace=True)
            x = nn.functional.max_pool2d(x, 2)

            x = cp.checkpoint(self.conv3, x, use_reentrant=False)
            x = nn.functional.relu(x, inplace=True)
            x = nn.functional.max_pool2d(x, 2)

            x = cp.checkpoint(self.fc1, x, use_reentrant=False)
            x = nn.functional.relu(x, inplace=True)
            x = cp.checkpoint(self.fc2, x, use_reentrant=False)
            x = nn.functional.relu(x, inplace=True)
            x = self.fc3(x)
            return x

    random.seed(0)
    torch.manual_seed(0)
    model = FullyConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    for i in range(150):
        h, w = random.randint(32, 160), random.randint(32, 160)
        inputs = torch.randn(2, 3, h, w)
        output = model(inputs)
        target = torch.randint(0, 2, (2, output.shape[2], output.shape[3]))
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 50 == 0:
            print(i, (h, w), loss.item())
