# Source: https://github.com/pytorch/pytorch/issues/74831
# Adapted: .cuda() -> cpu; pytorch_memlab's MemReporter dropped (not part of torch); the
#   reporter's single forward/backward repeated 200 times on a (64, 512) input through
#   Linear(512, 256)/Linear(256, 512) layers, the count of live BackwardHook objects and
#   tensors printed every 50 iterations, seeded.
import torch
import torch.nn as nn
import gc

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 256, bias=False), nn.Linear(256, 512, bias=False))
model[0].register_full_backward_hook(lambda m, gin, gout: None)
for i in range(200):
    x = torch.rand(64, 512)
    y = model(x).sum()
    y.backward()
    if i % 50 == 0:
        print(i, len([obj for obj in gc.get_objects() if isinstance(obj, torch.utils.hooks.BackwardHook)]),
              sum(torch.is_tensor(obj) for obj in gc.get_objects()))
