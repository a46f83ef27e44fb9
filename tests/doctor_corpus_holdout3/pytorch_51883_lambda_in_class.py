# Source: https://github.com/pytorch/pytorch/issues/51883
# Adapted: the input (200000, 3) doubles instead of (50000000, 3), `.to(torch.device("cuda"))`
#   -> cpu, torch.cuda.empty_cache() dropped and torch.cuda.memory_allocated() replaced by the
#   bytes of the tensors still alive (counted through weak references), 60 calls instead of
#   100, the attribute `_leak_fcn` renamed `_obj2_fcn` and the comment on it dropped (both
#   named the problem), seeded.
import weakref

import torch

torch.manual_seed(0)
alive = []


class Class1(object):
    def __init__(self, x0):
        self.x0 = x0
        self.obj2 = Class2()
        self._obj2_fcn = lambda: self.obj2.fcn()

class Class2(object):
    def fcn(self):
        pass

def fcn(x0):
    obj1 = Class1(x0)
    return x0

def test_fcn():
    shape = (200000, 3)
    y0 = torch.randn(shape).to(torch.double).to(torch.device("cpu"))
    alive.append(weakref.ref(y0))
    y = fcn(y0)
    return y

for i in range(60):
    test_fcn()
    held = sum(r().numel() * r().element_size() for r in alive if r() is not None)
    if i % 10 == 0:
        print("memory allocated: %f MiB" % float(held / 1024 ** 2))
