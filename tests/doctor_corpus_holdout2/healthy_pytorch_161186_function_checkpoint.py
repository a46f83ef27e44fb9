# Source: https://github.com/pytorch/pytorch/issues/161186
# Adapted: device="cuda" -> cpu, 2**18 elements instead of 2**20, 100 iterations instead of
#   1000, torch.cuda.memory_allocated() replaced by the bytes of live tensors every 20 iterations.
import gc

import torch
import torch.utils.checkpoint

class MyOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp: torch.Tensor):
        out_0 = torch.zeros(2**18, device=inp.device, dtype=torch.float32)
        out_1 = torch.zeros(2**18, device=inp.device, dtype=torch.float32)
        ctx.save_for_backward(
            inp,
            out_0,
            out_1,
        )
        return out_0, out_1

    @staticmethod
    def backward(ctx, dA, dB):
        _ = ctx.saved_tensors  # this is necessary
        return None


def op_fn(inp):
    return MyOp.apply(inp)[0]


dummy_input = torch.nn.Parameter(torch.randn(2**18, device="cpu"))
for i in range(100):
    full_out = torch.utils.checkpoint.checkpoint(op_fn, dummy_input, use_reentrant=False)
    full_out.sum().backward()
    dummy_input.grad = None  # free gradient memory
    if i % 20 == 0:
        live = [o for o in gc.get_objects() if torch.is_tensor(o)]
        print(i, sum(t.untyped_storage().nbytes() for t in live) / 1024**2, "MiB")
        del live
