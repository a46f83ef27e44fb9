# Source: https://github.com/pytorch/pytorch/issues/29809
# Adapted: the embedding table 50000x100 instead of 500000x100 and batches of 20 instead of 300
#   rows (widths still random in 100..3000), memory_profiler's @profile dropped (not
#   installed), 40 calls instead of 20 with the RSS printed every 10, seeded.
import os
import random
import torch
from torch import nn


class DummyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50000, 100)
        self.conv = nn.Conv1d(100, 200, 3)

    def forward(self, x):
        x = self.embed(x)
        x = torch.transpose(x, 1, 2)
        x = self.conv(x)
        return torch.mean(x)


random.seed(0)
torch.manual_seed(0)
model = DummyModel()


def run():
    x = torch.randint(0, 50000, (20, random.randint(100, 3000)))
    model(x)


for i in range(40):
    run()
    if i % 10 == 0:
        with open("/proc/%d/statm" % os.getpid()) as f:
            print(i, int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20, "MiB")
