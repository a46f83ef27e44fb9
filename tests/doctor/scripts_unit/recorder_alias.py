from collections import defaultdict

import torch
from torch import nn


class Recorder:
    def __init__(self):
        self._store = defaultdict(list)

    def add(self, values):
        store = self._store
        for key, value in values.items():
            store[key].append(value)


def train(net, steps=36):
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    rec = Recorder()
    for _ in range(steps):
        x = torch.randn(48, 16)
        out = net(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.add({"loss": loss, "norm": out.norm()})
    return rec


torch.manual_seed(0)
print(len(train(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8)))._store["loss"]))
