# Source: https://github.com/pytorch/pytorch/issues/2817
# Adapted: the first loop of the issue with 250 iterations instead of 100000, tensors of
#   2x2x200000 instead of 2x2x1000000, filled with random values (torch.FloatTensor(...)
#   leaves them uninitialised) and without the 0.1 s sleep; a print of the result's shape
#   every 100 iterations added, seeded.
import time

import torch

torch.manual_seed(0)
for i in range(250):
    a = torch.FloatTensor(2,2,200000).uniform_().min(0)[0]
    if i % 100 == 0:
        print(i, tuple(a.shape))
