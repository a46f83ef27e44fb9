# Source: https://github.com/pytorch/pytorch/issues/3394
# Adapted: the legacy (non-static) autograd.Function rewritten with static forward/backward
#   and Mult.apply (today's PyTorch rejects legacy Functions), 100 iterations without tqdm
#   instead of 10**8 with trange, seeded.
import torch
from torch.autograd import Variable
from torch import nn

torch.manual_seed(0)

CUDA = False

B = 2
BIG = 512

criterion = nn.MSELoss()

class Mult(torch.autograd.Function):

    @staticmethod
    def forward(ctx, big, vector):

        ctx.save_for_backward(big)

        return vector * 2.0

    @staticmethod
    def backward(ctx, grad_output):

        return None, None

def iteration():

    big = torch.zeros(B, BIG, BIG)
    x = torch.rand(B, 32)
    y = torch.zeros(B, 32)
    target = x.clone()

    if CUDA:
        big, x, y, target = big.cuda(), x.cuda(), y.cuda(), target.cuda()
    big, x, y, target = Variable(big), Variable(x, requires_grad=True), Variable(y), Variable(target)

    for b in range(B):
      y[b, :] = Mult.apply(big[b, :, :], x[b, :])

    loss = criterion(y, target)

for i in range(100):
    iteration()
