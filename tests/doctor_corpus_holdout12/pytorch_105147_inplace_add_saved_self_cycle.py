# Source: https://github.com/pytorch/pytorch/issues/105147
#   code: the reproduction (Net, foo with the in-place a += a * y), called repeatedly as
#   a per-request function would be
# Adapted: cuda dropped (cpu); Linear(1, 1) on one scalar widened to Linear(256, 256) on a
#   batch of 64 so that each call's retained memory is visible; foo() called 300 times instead
#   of once, with the gc.collect() and a memory print every 60 calls; seeded.
import gc

import psutil
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.linear = torch.nn.Linear(256, 256)

    def forward(self, x):
        return self.linear(x)


def foo():
    net = Net()
    x = torch.randn(64, 256)
    y = net(x)

    a = torch.ones((64, 256))

    a += a * y


torch.manual_seed(0)
process = psutil.Process()
for i in range(300):
    foo()
    if i % 60 == 0:
        gc.collect()
        print(i, round(process.memory_info().rss / 2**20, 1), "MiB")
