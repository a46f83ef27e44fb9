import torch
from torch import nn

torch.manual_seed(0)


class Optimizers:
    def __init__(self, params):
        self.optimizers = [torch.optim.SGD(params, lr=0.01)]

    def step(self):
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self):
        for optimizer in self.optimizers:
            optimizer.zero_grad()


class Trainer:
    def __init__(self):
        self.model = nn.Linear(16, 1)
        self.optimizers = Optimizers(self.model.parameters())

    def train_step(self, x):
        self.model(x).pow(2).mean().backward()
        self.optimizers.step()

    def train(self, steps):
        self.optimizers.zero_grad()
        for _ in range(steps):
            self.train_step(torch.randn(8, 16))


Trainer().train(40)
