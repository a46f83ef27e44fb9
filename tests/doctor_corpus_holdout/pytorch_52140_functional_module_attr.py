# Source: https://github.com/pytorch/pytorch/issues/52140
# Adapted: the stored copy of the report is cut inside test_functional() after
#   `a = torch.ones((200`: completed as a (200, 1000) float64 tensor and a DummyModule built
#   from it, test_functional() called 100 times; the NO_MEMLEAK_IF comments removed.
import torch

def functional(fcn, y0):
    params = fcn.__self__.parameters()  # assuming fcn is a method of `torch.nn.Module`
    return Functional.apply(fcn, y0, *params)

class Functional(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fcn, y0, *params):
        y = fcn(y0)
        ctx.fcn = fcn
        return y

class DummyModule(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = torch.nn.Parameter(a)
        x0 = torch.ones_like(a)
        xsol = functional(self.forward, x0)
        self.xsol = xsol

    def forward(self, x):
        return self.a * x

def test_functional():
    a = torch.ones((200, 1000), dtype=torch.float64)
    module = DummyModule(a)

for i in range(100):
    test_functional()
