# Source: https://github.com/rtqichen/torchdiffeq/issues/152
#   code: the example, and torchdiffeq/_impl/adjoint.py (OdeintAdjointMethod.forward,
#   odeint_adjoint, find_parameters) at ff42a45, the state of the library when it was reported
# Adapted: the example kept as posted (the comment marking the culprit line dropped); torchdiffeq
#   is not installed, so odeint_adjoint is its code reduced to the path the example takes (no
#   event function, no tuple state, default options): OdeintAdjointMethod.forward is kept as it
#   is, its backward (never run here) only raises, and odeint is a fixed-step Euler solver with
#   the same call instead of dopri5; a of 300000 doubles -> 20000, t of 1000 points -> 120,
#   the loop's 5 calls -> 20; cuda -> cpu (the memory print uses psutil); the example's odeint
#   (odeint_adjoint imported under that name) is called odeint_ here, as the library's own
#   odeint shares the file.
import psutil
import torch
import torch.nn as nn


def odeint(func, y0, t, rtol=1e-7, atol=1e-9, method=None, options=None, event_fn=None):
    ys = [y0]
    for i in range(1, len(t)):
        ys.append(ys[-1] + (t[i] - t[i - 1]) * func(t[i - 1], ys[-1]))
    return torch.stack(ys)


class OdeintAdjointMethod(torch.autograd.Function):

    @staticmethod
    def forward(ctx, shapes, func, y0, t, rtol, atol, method, options, event_fn, adjoint_rtol, adjoint_atol, adjoint_method,
                adjoint_options, t_requires_grad, *adjoint_params):

        ctx.shapes = shapes
        ctx.func = func
        ctx.adjoint_rtol = adjoint_rtol
        ctx.adjoint_atol = adjoint_atol
        ctx.adjoint_method = adjoint_method
        ctx.adjoint_options = adjoint_options
        ctx.t_requires_grad = t_requires_grad
        ctx.event_mode = event_fn is not None

        with torch.no_grad():
            ans = odeint(func, y0, t, rtol=rtol, atol=atol, method=method, options=options, event_fn=event_fn)

            if event_fn is None:
                y = ans
            else:
                event_t, y = ans
                ctx.event_t = event_t

        ctx.save_for_backward(t, y, *adjoint_params)
        return ans

    @staticmethod
    def backward(ctx, *grad_y):
        raise NotImplementedError("the adjoint pass is not part of this example")


def find_parameters(module):
    assert isinstance(module, nn.Module)
    return list(module.parameters())


def odeint_adjoint(func, y0, t, *, rtol=1e-7, atol=1e-9, method=None, options=None, event_fn=None,
                   adjoint_rtol=None, adjoint_atol=None, adjoint_method=None, adjoint_options=None, adjoint_params=None):
    if adjoint_rtol is None:
        adjoint_rtol = rtol
    if adjoint_atol is None:
        adjoint_atol = atol
    if adjoint_method is None:
        adjoint_method = method
    if adjoint_options is None:
        adjoint_options = {k: v for k, v in options.items() if k != "norm"} if options is not None else {}
    if adjoint_params is None:
        adjoint_params = tuple(find_parameters(func))
    adjoint_params = tuple(p for p in adjoint_params if p.requires_grad)
    shapes = None
    ans = OdeintAdjointMethod.apply(shapes, func, y0, t, rtol, atol, method, options, event_fn, adjoint_rtol, adjoint_atol,
                                    adjoint_method, adjoint_options, t.requires_grad, *adjoint_params)
    return ans


odeint_ = odeint_adjoint


class SimpleFunction(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = torch.nn.Parameter(a)
        x0 = torch.ones_like(a)
        t = torch.linspace(0, 1, 120, dtype=a.dtype, device=a.device)
        xt = odeint_(self, x0, t)
        self.xt = xt

    def forward(self, t, x):
        return -self.a * x


def test_fcn():
    a = torch.ones((20000,), dtype=torch.double, device=torch.device("cpu"))
    model = SimpleFunction(a)


for i in range(20):
    test_fcn()
    print("memory used:", psutil.Process().memory_info().rss / (1024 ** 2), "MiB")
