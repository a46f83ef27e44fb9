# Source: https://github.com/pytorch/pytorch/issues/16445
# Adapted: the reproduction as posted (a Conv2d called again and again on the same
#   input with grad enabled, the output dropped); 1e4 calls -> 1500, the ru_maxrss print every
#   1000 calls -> every 500.
import torch
import numpy as np
import resource

CNN = torch.nn.Conv2d(4, 50, 10, stride=5)
a = torch.FloatTensor(np.ones((4,100,100))).unsqueeze(0)
for i in range(1500):
    CNN(a)

    if i % 500 == 0:
        print('Memory usage: %s (kb)' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
