import torch
import torch.nn.functional as F
from torch import nn


class Tracker(dict):
    def __add__(self, other):
        out = Tracker(self)
        for k, v in other.items():
            out[k] = out.get(k, 0) + v
        return out

    def __mul__(self, alpha):
        return Tracker({k: v * alpha for k, v in self.items()})


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
opt = torch.optim.SGD(net.parameters(), lr=0.05)
tot = Tracker()
for step in range(60):
    x, y = torch.randn(16, 32), torch.randint(0, 8, (16,))
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    info = Tracker()
    info["loss"] = loss
    info["frames"] = 16
    tot = tot * 0.99 + info
print(round(float(tot["loss"]), 3), tot["frames"])
