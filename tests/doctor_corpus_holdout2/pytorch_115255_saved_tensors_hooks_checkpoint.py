# Source: https://github.com/pytorch/pytorch/issues/115255
# Adapted: cuda -> cpu; report_memory prints the bytes of live tensors instead of
#   torch.cuda.memory_allocated()/memory_reserved(); the stored copy of the report stops inside
#   forward(), so the rest of forward (ln3) and the loop (checkpoint over the model, backward,
#   report every 10 of 60 iterations) were completed as the report describes them.
import gc

import torch
from torch.utils.checkpoint import checkpoint

def report_memory(name):
    """Simple memory report."""

    mega_bytes = 1024.0 * 1024.0
    live = [o for o in gc.get_objects() if torch.is_tensor(o)]
    string = name + " memory (MB)"
    string += " | allocated: {:.1f}".format(sum(t.untyped_storage().nbytes() for t in live) / mega_bytes)
    print(string)

class TestNN(torch.nn.Module):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ln1 = torch.nn.Linear(10,20)
        self.ln2 = torch.nn.Linear(20,3000)
        self.ln3 = torch.nn.Linear(3000,40)
        
    def forward(self, x):
        x = self.ln1(x)
        x = torch.nn.functional.relu(x)
        # intend to use inner saved_tensors_hooks to disable _checkpoint_hook
        with torch.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
            x = self.ln2(x)
            x = torch.nn.functional.relu(x)
        x = self.ln3(x)
        return x

torch.manual_seed(0)
model = TestNN()
for i in range(60):
    x = torch.randn(256, 10, requires_grad=True)
    y = checkpoint(model, x, use_reentrant=False)
    y.sum().backward()
    if i % 10 == 0:
        report_memory(str(i))
