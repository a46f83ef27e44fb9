# Source: https://github.com/pytorch/pytorch/issues/50185
# Adapted: cuda -> cpu, 1 MiB tensors instead of 400 MiB, 60 iterations instead of 100.
import gc
import torch


class Garbage:
  def __init__(self, obj):
    self.obj = obj
    self.cycle = self


gc.collect()
for i in range(60):
  Garbage(torch.empty(256 * 1, 1024))
  print(i)
