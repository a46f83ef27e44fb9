# Source: https://github.com/pytorch/pytorch/issues/1111
# Adapted: 3000 iterations instead of an endless loop (gc and a print every 1000, not 10000),
#   torch.Tensor(1,3) (uninitialised) -> torch.rand(1,3), seeded.
import torch
import gc
import resource
from torch import nn
from torch.autograd import Variable

torch.manual_seed(0)
# inp = Variable(torch.Tensor(1,3), volatile=True) # This one does not have a problem
inp = Variable(torch.rand(1,3)) # This one does
linear_layer = nn.Linear(3, 6)

iter_idx = 0
while iter_idx < 3000:
    out = linear_layer(inp).view(-1)
    a = Variable(torch.zeros(6))

    for elt_idx, out in enumerate(out):
        a[elt_idx] = out + a[elt_idx]

    if iter_idx % 1000 == 0:
        gc.collect()
        max_mem_used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print("{:.2f} MB".format(max_mem_used / 1024))


    iter_idx += 1
