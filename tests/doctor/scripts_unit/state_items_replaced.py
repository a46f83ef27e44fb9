import torch
from torch import nn


class Unrolled:
    def __init__(self, model, lr):
        self.lr = lr
        self.groups = []
        self.velocities = []
        self.add_group(model)

    def add_group(self, model):
        params = list(model.parameters())
        self.groups.append(params)
        self.velocities.append([torch.zeros_like(p) for p in params])

    def step(self, loss):
        for i, params in enumerate(self.groups):
            grads = torch.autograd.grad(loss, params, create_graph=True)
            new_velocity = [0.9 * v + g for v, g in zip(self.velocities[i], grads)]
            self.velocities[i] = new_velocity  # differentiable: chains every step's graph


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
opt = Unrolled(model, lr=1e-2)
for step in range(200):
    x, y = torch.randn(32, 16), torch.randn(32, 1)
    loss = ((model(x) - y) ** 2).mean()
    opt.step(loss)
    if step % 50 == 0:
        print(step, round(loss.item(), 4))
