# Source: https://github.com/pytorch/pytorch/issues/839
# Adapted: torch.cuda.FloatTensor -> torch.FloatTensor, 2000 iterations instead of 100000.
import torch
from torch.autograd import Variable

for _ in range(2000):
    init = Variable(torch.FloatTensor(2, 32, 512).zero_())
    init[0] = Variable(torch.FloatTensor(32, 512).zero_())
