# Source: https://github.com/pytorch/pytorch/issues/51978
# Adapted: .to(torch.device("cuda")) -> cpu, shape (300, 1000) instead of (10000, 10000);
#   the stored copy of the report ends at `loss.bac`: completed as `loss.backward()` with
#   test_fcn() called 100 times.
import torch

class Functional1(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fcn, y0, *params):
        ctx.fcn = fcn
        ctx.save_for_backward(y0, *params)
        return y0
    @staticmethod
    def backward(ctx, grad_yout):
        yout, *params = ctx.saved_tensors
        with torch.enable_grad():
            params_copy = [p.clone().requires_grad_() for p in params]
            yfcn = ctx.fcn(yout, *params_copy)
        grad_params = torch.autograd.grad(yfcn, params_copy, grad_outputs=grad_yout,
                                          create_graph=torch.is_grad_enabled())
        return (None, None, *grad_params)

def fcn2(x, x2):
    return x + x2

def test_fcn():
    shape = (300, 1000)
    y0 = torch.zeros(shape).to(torch.double)
    y2 = y0.clone().requires_grad_()
    loss = (Functional1.apply(fcn2, y0, y2) ** 2).sum()
    loss.backward()

for i in range(100):
    test_fcn()
