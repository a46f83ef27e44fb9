import torch
from torch import nn


class Meter:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.total = self.total + value * n
        self.count += n


def log_value(meters, name, value, n=1):
    if name not in meters:
        meters[name] = Meter()
    meters[name].update(value, n)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
meters = {}
for step in range(40):
    x = torch.randn(32, 20)
    loss = (model(x) - x[:, :1]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log_value(meters, "loss", loss, x.size(0))
print(round(meters["loss"].total.item() / meters["loss"].count, 4))
