# Source: https://github.com/pytorch/pytorch/issues/25340
# Adapted: the reporter's single call (followed by a 20 s sleep) run in a loop of 200 calls on
#   a 256x256 input, the weak references to each ctx kept as in the report, seeded.
import gc
import time
import torch
import weakref


class Test(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, refs):
        refs.append(weakref.ref(ctx))
        y = x.clone()
        ctx.y = y
        return y


if __name__ == '__main__':
    torch.manual_seed(0)
    refs = []  # weakrefs to ctx objects
    x = torch.rand(256, 256, requires_grad=True)
    for i in range(200):
        y = Test.apply(x, refs)
        del y
    alive = sum(r() is not None for r in refs)
    print(alive, "of", len(refs), "contexts alive")
    gc.collect()
    print(sum(r() is not None for r in refs), "alive after gc.collect()")
