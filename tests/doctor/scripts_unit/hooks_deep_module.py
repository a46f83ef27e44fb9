import torch
from torch import nn


class Tools:
    def __init__(self, model):
        self.model = model
        self.outputs = []

    def attach(self, layer):
        layer.register_forward_hook(self.keep)
        layer.register_full_backward_hook(self.seen)

    def keep(self, module, args, output):
        self.outputs.append(output.detach())

    def seen(self, module, grad_input, grad_output):
        return None


class Trainer:
    def __init__(self):
        self.tools = Tools(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
        self.opt = torch.optim.SGD(self.tools.model.parameters(), lr=0.01)

    def step(self):
        self.tools.attach(self.tools.model[1])
        self.tools.outputs.clear()
        loss = self.tools.model(torch.randn(16, 32)).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss


torch.manual_seed(0)
trainer = Trainer()
for step in range(24):
    loss = trainer.step()
print(f"{loss.item():.6f}")
