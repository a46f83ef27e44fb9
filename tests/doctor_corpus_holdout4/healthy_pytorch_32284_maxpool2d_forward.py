# Source: https://github.com/pytorch/pytorch/issues/32284
# Adapted: the second reproducer of the issue (a Network holding one MaxPool2d, called in a
#   `while True` loop) bounded to 20000 iterations; memory_profiler's @profile dropped (not
#   installed); debug_memory() called every 5000 iterations instead of every iteration;
#   OMP_NUM_THREADS=1 kept, seeded.
import os
os.environ["OMP_NUM_THREADS"] = "1"
import torch
from torch import nn
import resource

class Network(torch.nn.Module):
    def __init__(self):
        super(Network, self).__init__()
        self.maxp1 = nn.MaxPool2d(2, 2)

    def forward(self, x):
        return self.maxp1(x)

def debug_memory():
    print('maxrss = {}'.format(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))

def func():
    batch = 2
    channels = 1
    side_dim = 80
    model = Network()
    x = torch.randn([batch, channels, side_dim, side_dim])
    for i in range(20000):
        y = model(x)
        if i % 5000 == 0:
            debug_memory()

torch.manual_seed(0)
func()
