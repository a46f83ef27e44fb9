# Source: https://github.com/pytorch/pytorch/issues/10032
# Adapted: the repro script of the issue (a scripted function called once from foo() with a
#   weight that requires grad, then a check of torch.cuda.memory_allocated) run with foo()
#   called 2000 times instead of once, tensors of 64x64 instead of 1x1, cpu instead of cuda,
#   the allocated-memory check replaced by the number of calls every 500 calls, seeded.
import sys
import torch

@torch.jit.script
def fn(x, w_ih):
    return x * w_ih.t()

def foo():
    x = torch.randn(64, 64, device='cpu')
    wih = torch.randn(64, 64, device='cpu', requires_grad=True)

    fn(x, wih)
    return

torch.manual_seed(0)
# Initialize things...
a = torch.randn(3, 3, device='cpu')

for call in range(2000):
    foo()
    if call % 500 == 0:
        print("calls:", call)
