import torch
from torch import nn


class Solve(torch.autograd.Function):
    @staticmethod
    def forward(ctx, step_fn, x0, weight):
        ctx.step_fn = step_fn
        return step_fn(x0)

    @staticmethod
    def backward(ctx, grad):
        return None, grad, None


class Layer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, n))
        self.cache = Solve.apply(self.forward, torch.randn(n, n), self.weight)

    def forward(self, x):
        return self.weight @ x


def build():
    layer = Layer(192)
    return layer.weight.shape


for i in range(50):
    shape = build()
print(shape)
