# Source: https://github.com/pytorch/pytorch/issues/21537
# Adapted: the script kept as posted; 20000 forward calls instead of 1000000, printing every
#   5000; seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(torch.jit.ScriptModule):

    def __init__(self):
        super(Net, self).__init__()

        self.conv = nn.Conv2d(1, 1, 1)

        self.lin = nn.Linear(100, 1)

    @torch.jit.script_method
    def forward(self, x):
        x = F.relu(self.conv(x))
        x = x.view(x.shape[0], -1)
        x = F.relu(self.lin(x))

        return x

torch.manual_seed(0)
m = Net()

x = torch.ones((1, 1, 10, 10))

for i in range(20000):
    m(x)
    if i % 5000 == 0:
        print(i)
