# Source: https://github.com/fastai/fastai1/blob/5300b7633b9011c5c9eaab0544b1e3368a279ec4/fastai/torch_core.py
# Adapted excerpt, context file at the parent of https://github.com/fastai/fastai1/commit/a4e0f5cc45d1ac012e3319c8f80ec0fc4231661a
# (trimmed to the code the bug crosses; omitted lines are marked).
"Utility functions to help deal with tensors"
from .imports.torch import *
from .core import *
from collections import OrderedDict
from torch.nn.parallel import DistributedDataParallel
# ... (lines 6-95 omitted)
def to_detach(b:Tensors, cpu:bool=True):
    "Recursively detach lists of tensors in `b `; put them on the CPU if `cpu=True`."
    def _inner(x, cpu=True):
        if not isinstance(x,Tensor): return x
        x = x.detach()
        return x.cpu() if cpu else x
    return recurse(_inner, b, cpu=cpu)

def to_data(b:ItemsList):
    "Recursively map lists of items in `b ` to their wrapped data."
    return recurse(lambda x: x.data if isinstance(x,ItemBase) else x, b)

def to_cpu(b:ItemsList):
    "Recursively map lists of tensors in `b ` to the cpu."
    return recurse(lambda x: x.cpu() if isinstance(x,Tensor) else x, b)
# ... (lines 111-423 omitted)
