# Source: https://github.com/pytorch/pytorch/issues/86537
# Adapted: the endless `while True` loop bounded to 100 traces, psutil replaced by the RSS read
#   from /proc/self/statm (psutil is not installed), the loop body after `m =` completed from
#   the report's description (a new MyModule of random depth and width traced at every
#   iteration), a print every 25 iterations, cpu, seeded.
import os
import random

import torch
import torch.nn as nn


class MyModule(nn.Module):
    def __init__(self, num_layers: int, input_dim: int) -> None:
        super().__init__()
        layer = nn.Sequential(
            nn.Linear(input_dim, input_dim),
            nn.LeakyReLU(),
        )
        self.layers = nn.Sequential(*[
            layer for _ in range(num_layers)
        ])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def rss():
    with open("/proc/%d/statm" % os.getpid()) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


if __name__ == '__main__':
    random.seed(0)
    torch.manual_seed(0)

    times = 0
    while times < 100:
        num_layers = random.randint(1, 15)
        input_dim = random.randint(1, 20)
        m = MyModule(num_layers, input_dim)
        traced = torch.jit.trace(m, torch.randn(4, input_dim))
        if times % 25 == 0:
            print(times, rss())
        times += 1
