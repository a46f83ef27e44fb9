# Source: https://github.com/pytorch/pytorch/issues/128211
# Adapted: the posted module and loop kept as they are; .cuda() dropped (cpu) and the buffer
#   made a 256x1024 tensor instead of a scalar so that the memory each instance keeps is
#   visible on the cpu; 60 instances instead of 3; the printed cuda.memory_allocated figures
#   replaced by the number of instances built so far.
import torch
import torch.nn as nn


class myModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("test", torch.randn(256, 1024))
        self.which_foo = self.foo

    def forward(self, x):
        return x

    def foo(self, x):
        return


for i in range(60):
    m = myModule()

    del m
    if i % 10 == 0:
        print("instances built:", i + 1)
