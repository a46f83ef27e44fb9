# Source: https://github.com/pytorch/pytorch/pull/141960
# Adapted: the pull request's test plan kept as posted; `m.cuda()` and `device="cuda"` dropped
#   (cpu) and torch.cuda.memory_allocated() replaced by the number of tensors gc sees;
#   seeded.
import gc
import torch
import torch.nn as nn
from torch.utils.module_tracker import ModuleTracker


class MyModel(nn.Module):
    def forward(self, x):
        return x * x

def memory_allocated():
    return sum(1 for o in gc.get_objects() if torch.is_tensor(o))

torch.manual_seed(0)
print(f"torch=={torch.__version__}")
m = MyModel()
m.to(torch.bfloat16)
mt = ModuleTracker()
for i in range(1000):
    if i % 100 == 0:
        gc.collect()
        print("memory_allocated:", memory_allocated())
    x = torch.randn([128, 256], dtype=torch.bfloat16, requires_grad=True)
    with mt:
        m(x)
