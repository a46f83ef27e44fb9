import torch
from torch import nn

torch.manual_seed(0)


class Probe:
    def __init__(self, module):
        self.module = module
        self.handles = []

    def attach(self, buffer):
        def keep_grad(module, grad_input, grad_output):
            buffer.append(grad_output[0].detach())

        self.handles.append(self.module.register_full_backward_hook(keep_grad))

    def detach(self, only_forward=True):
        if not only_forward:
            for handle in self.handles:
                handle.remove()
            self.handles = []


model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10))
probe = Probe(model[0])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(40):
    buffer = []
    probe.attach(buffer)
    opt.zero_grad()
    model(torch.randn(16, 64)).sum().backward()
    opt.step()
    probe.detach()
