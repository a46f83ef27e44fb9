# Source: https://github.com/pytorch/pytorch/issues/71068
# Adapted: pytorch_memlab's MemReporter replaced by a count of live tensors every 20 steps;
#   the stored copy of the report stops inside _register_backward_hooks, so the hook body (it
#   reads grad_in/grad_out) and the loop (forward, backward(create_graph=True), the parameters'
#   .grad reset to None as the report says it did) were completed as the report describes
#   them; Linear(256, 256), 100 steps, cuda -> cpu, seeded.
import gc

import torch
import torch.nn as nn


class TestModel(nn.Module):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.nn = nn.Linear(input_size, output_size)
        self._register_backward_hooks()

    def forward(self, x):
        pred = self.nn(x)
        return pred

    def _register_backward_hooks(self):
        def hook(module, grad_in, grad_out):
            self.last_grad_norm = grad_out[0].detach().norm().item()

        self.nn.register_full_backward_hook(hook)


torch.manual_seed(0)
model = TestModel(256, 256)
for step in range(100):
    x = torch.randn(64, 256, requires_grad=True)
    pred = model(x)
    loss = pred.pow(2).mean()
    loss.backward(create_graph=True)
    for p in model.parameters():
        p.grad = None
    x.grad = None
    if step % 20 == 0:
        print(step, sum(torch.is_tensor(o) for o in gc.get_objects()), model.last_grad_norm)
