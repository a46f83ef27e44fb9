# Source: https://github.com/pytorch/pytorch/issues/84413
# Adapted: .cuda() -> cpu, a 512x512 input instead of 4096x4096, torch.cuda.max_memory_allocated()
#   replaced by the number of live tensors every 10 iterations, 60 iterations instead of 50,
#   the reporter's comments about the leak removed.
import gc

import torch
from torch.utils.checkpoint import checkpoint

def foo(x) -> torch.Tensor:
    data = {'dummy': x * 0}
    def bar(x):
        data
        return x
    x = checkpoint(bar, x, use_reentrant=True)
    data['x'] = x
    return x

x = torch.zeros(512, 512).requires_grad_(True)
for i in range(60):
    xx = foo(x).sum()
    xx.backward()
    if i % 10 == 0:
        print(i, sum(torch.is_tensor(o) for o in gc.get_objects()))
