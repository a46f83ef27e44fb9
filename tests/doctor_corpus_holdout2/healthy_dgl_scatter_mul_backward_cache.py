# Source: https://github.com/dmlc/dgl/pull/1060
# Adapted: the ScatterMul Function of the pull request's description (copied there from
#   PyTorch-Scatter, in the `ctx.backward_cache = src, index` variant the description discusses);
#   torch_scatter's compiled kernel get_func('scatter_mul') replaced by
#   Tensor.scatter_reduce_(reduce='prod'), the backward and the scatter_mul wrapper written with
#   torch ops, and the calling loop (100 calls on 20000-element inputs, forward then backward)
#   written for this script since the description shows none; the description's comments
#   about which variant leaks removed; cuda -> cpu, seeded.
import torch
from torch.autograd import Function


def get_func(name, tensor):
    def scatter_mul(src, index, out, dim):
        out.scatter_reduce_(dim, index, src, reduce='prod')
    return scatter_mul


class ScatterMul(Function):
    @staticmethod
    def forward(ctx, out, src, index, dim):
        func = get_func('scatter_mul', src)
        func(src, index, out, dim)

        ctx.mark_dirty(out)
        ctx.save_for_backward(out)
        ctx.backward_cache = src, index
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, grad_out):
        out, = ctx.saved_tensors
        src, index = ctx.backward_cache
        grad_src = None
        if ctx.needs_input_grad[1]:
            grad_src = (grad_out * out).gather(ctx.dim, index) / src
        return None, grad_src, None, None


def scatter_mul(src, index, dim=-1, out=None, dim_size=None):
    if out is None:
        dim_size = int(index.max()) + 1 if dim_size is None else dim_size
        out = src.new_ones(dim_size)
    return ScatterMul.apply(out, src, index, dim)


if __name__ == '__main__':
    torch.manual_seed(0)
    for i in range(100):
        src = (torch.rand(20000) + 0.5).requires_grad_()
        index = torch.randint(0, 100, (20000,))
        out = scatter_mul(src * 1.0, index, dim=0, dim_size=100)
        out.sum().backward()
        if i % 20 == 0:
            print(i, float(src.grad.abs().sum()))
