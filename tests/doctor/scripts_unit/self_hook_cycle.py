import torch
from torch import nn

torch.manual_seed(0)


class Explainer:
    def __init__(self, model):
        self.model = model
        self.activations = None
        self.gradients = None

    def save_gradient(self, grad):
        self.gradients = grad

    def __call__(self, x):
        out = self.model(x)
        self.activations = out
        out.register_hook(self.save_gradient)
        return out


model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4096))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(60):
    explainer = Explainer(model)
    out = explainer(torch.randn(32, 64))
    opt.zero_grad()
    out.sum().backward()
    opt.step()
