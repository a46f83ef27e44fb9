# Source: https://github.com/pytorch/pytorch/issues/1473
# Adapted: the reproduction kept as posted with N=5000 instead of 50000 (the unused dense
#   N x N matrix is 25 million elements instead of 2.5 billion), `cuda=False` (cpu) and
#   `while True` -> 3000 iterations, printing every 500; `torch.Tensor([[0]]*N)` as posted;
#   seeded.
import torch
import random

random.seed(0)
torch.manual_seed(0)
N=5000
S=500
cuda=False
sparse = torch.sparse.FloatTensor(
    #randomly populate the matrix, but make sure it has desired dimensionality
    torch.LongTensor([
        [random.randint(0,S) for i in range(S-1)]+[N-1],
        [random.randint(0,S) for i in range(S-1)]+[N-1]]),
    torch.FloatTensor([random.random() for i in range(S-1)]+[1])
)
dense = torch.arange(0,N*N).view(N, N)
x = torch.Tensor([[0]]*N)
if cuda:
    x=x.cuda()
    sparse=sparse.cuda()
    dense=dense.cuda()
i = 0
while i < 3000:
    y = torch.addmm(x, sparse, x)
    if i % 500 == 0:
        print(i, tuple(y.shape))
    i += 1
