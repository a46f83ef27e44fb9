# Source: https://discuss.pytorch.org/t/how-computation-graph-in-pytorch-is-created-and-freed/3515/4
# Adapted: the posted loop kept as it is, on the cpu instead of `.cuda()`; seeded.
import torch

torch.manual_seed(0)
for i in range(100):
    a = torch.autograd.Variable(torch.randn(2, 3), requires_grad=True)
    y = torch.sum(a)
    y.backward(retain_graph=True)
print(a.grad)
