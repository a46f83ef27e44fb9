# Source: https://github.com/pytorch/pytorch/issues/2068
# Adapted: Python 2 -> 3 (xrange -> range), 100 outer iterations instead of 10000, seeded.
import numpy as np
import torch
from torch.autograd import Variable

np.random.seed(0)

a = np.random.rand(1000, 1000)

for i in range(100):
    b = Variable(torch.from_numpy(a).clone(), requires_grad=False)
    c = torch.index_select(b, 0, Variable(torch.LongTensor([4])))

    for t in range(1000):
        b[t, :] = c
