import functools

import torch
from torch import nn


@functools.lru_cache(maxsize=None)
def layer_names(kind):
    return tuple(kind.split("-"))


torch.manual_seed(0)
for trial in range(8):
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.Linear(512, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    for step in range(6):
        x, y = torch.randn(32, 64), torch.randint(0, 4, (32,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        names = layer_names("linear-relu-linear-linear")
    print(trial, len(names), round(loss.item(), 4))
