import torch
from torch import nn

torch.manual_seed(0)


class Point(nn.Module):
    def __init__(self):
        super().__init__()
        self.handles = []

    def add_hook(self, hook, prepend=False):
        handle = self.register_forward_hook(hook)
        if prepend:
            self.handles.insert(0, handle)
        else:
            self.handles.append(handle)

    def forward(self, x):
        return x


model = nn.Sequential(nn.Linear(32, 256), Point(), nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(40):
    seen = []
    model[1].add_hook(lambda module, inputs, output: seen.append(output))
    opt.zero_grad()
    model(torch.randn(64, 32)).sum().backward()
    opt.step()
