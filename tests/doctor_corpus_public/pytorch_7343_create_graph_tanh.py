# Source: https://github.com/pytorch/pytorch/issues/7343
# Adapted: the interactive session as a script, repeated 400 times in a loop (as a training
#   step would) with gc.collect() every 100 steps instead of once; cpu instead of cuda;
#   x has 1000 elements instead of 1; memory_allocated() prints left out.
import gc

import torch

for step in range(400):
    x = torch.randn(1000, requires_grad=True)
    y = x.tanh()
    y.backward(torch.ones_like(y), create_graph=True)
    del x, y
    if step % 100 == 99:
        gc.collect()
print(step + 1)
