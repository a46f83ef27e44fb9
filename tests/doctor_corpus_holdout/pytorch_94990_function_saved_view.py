# Source: https://github.com/pytorch/pytorch/issues/94990
# Adapted: the first autograd.Function-only repro from the thread; device='cuda' -> cpu,
#   ones(646, 640) instead of ones(64656, 640), 60 iterations instead of 300, the
#   memory_allocated() print replaced by the iteration number.
import torch

inps = [
    torch.ones(646, 640, requires_grad=True),
    torch.ones(1, 128, 2, requires_grad=True) * 5,
]

def f(a, b):
    add = torch.ops.aten.add.Tensor(a, a)
    split_with_sizes = torch.ops.aten.split_with_sizes.default(add, [256, 256, 128], 1)
    getitem_2 = split_with_sizes[2]
    unsqueeze = torch.ops.aten.unsqueeze.default(getitem_2, -1)
    mul = torch.ops.aten.mul.Tensor(unsqueeze, b)
    return [getitem_2, mul, add, b, unsqueeze]

class TestFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *inps):
        num_forward_returns = 3
        getitem_2, mul, add, b, unsqueeze = f(*inps)
        ctx.save_for_backward(unsqueeze)
        return getitem_2, mul, add

    @staticmethod
    def backward(ctx, *flat_args):
        return None

for i in range(60):
    output = TestFn.apply(*inps)
    del output
    print(i)
