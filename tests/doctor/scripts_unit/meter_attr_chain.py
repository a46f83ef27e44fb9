import torch
from torch import nn


class RunningMean:
    def __init__(self):
        self.mean = 0.0
        self.total = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.total += value * n
        self.count += n
        self.mean = self.total / self.count


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01)
        self.stats = {"train": {}}

    def log(self, split, values, n):
        for name, value in values.items():
            if name not in self.stats[split]:
                self.stats[split][name] = RunningMean()
            self.stats[split][name].update(value, n)

    def fit(self, steps):
        for step in range(steps):
            x = torch.randn(32, 16)
            loss = self.model(x).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.log("train", {"loss": loss}, x.size(0))


torch.manual_seed(0)
trainer = Trainer(nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)))
trainer.fit(60)
print(round(trainer.stats["train"]["loss"].mean.item(), 4))
