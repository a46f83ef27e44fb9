# Source: https://github.com/pytorch/pytorch/issues/4661
# Adapted: cuda -> cpu, Linear(3000, 1) and ones(100, 3000) instead of 30000 features,
#   60 repetitions instead of 1000.
import torch

net = torch.nn.Linear(3000,1)
data = torch.ones(100, 3000)
for rep in range(60):
  for batchIndices in range(0,100,100):
    batch = torch.autograd.Variable(data[batchIndices:batchIndices+10], requires_grad=True)
    net.forward(batch).norm(2).backward(create_graph=True)
    batch.grad.norm(2).backward()
