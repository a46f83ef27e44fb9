import time

import torch
from torch import nn


class RunningAverage:
    def __init__(self):
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 256), nn.Tanh(), nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
step_time, losses = RunningAverage(), RunningAverage()
for step in range(60):
    start = time.perf_counter()
    x = torch.randn(32, 20)
    loss = (model(x) - x[:, :1]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.update(loss, x.size(0))  # the tensor, with its graph
    step_time.update(time.perf_counter() - start)  # a float, through the same method
print(round(float(losses.avg), 4), step_time.count)
