# Source: https://github.com/pytorch/pytorch/issues/13957
# Adapted: 10000 -> 400 iterations (memory printed every 100), a seed.
import torch
from resource import *

torch.manual_seed(0)
S = 256
X = torch.randn(S, S, requires_grad=True)

for i in range(400):
    if i % 100 == 0:
        print(i, '\t', getrusage(RUSAGE_SELF).ru_maxrss, 'kB used')

    Z = X.sum(1, True) + torch.linspace(-S, S, S)
    Y = X * torch.erf(Z).sum(1, True)
    loss = Y.t().mm(Y).inverse().sum() + Y.sum()
    loss.backward()
