import functools

import torch
from torch import nn


class Positions(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    @functools.lru_cache(maxsize=64)
    def forward(self, length):
        steps = torch.arange(length, dtype=torch.float32)[:, None]
        freqs = torch.arange(self.dim, dtype=torch.float32)[None] / self.dim
        return torch.sin(steps * freqs)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = Positions(64)
        self.lin = nn.Linear(64, 64)

    def forward(self, x):
        return self.lin(x + self.pos(x.shape[0]))


torch.manual_seed(0)
x = torch.randn(512, 64)
for run in range(16):
    net = Net().eval()
    with torch.no_grad():
        y = net(x)
    print(run, round(y.mean().item(), 4))
    del net
