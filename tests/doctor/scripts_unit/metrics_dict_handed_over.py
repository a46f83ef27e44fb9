from collections import defaultdict

import torch
from torch import nn


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01)
        self.logged = defaultdict(list)

    def losses(self, x, y):
        out = self.model(x)
        loss = nn.functional.mse_loss(out, y)
        penalty = out.pow(2).mean()
        stats = {}
        stats["loss"] = loss.item()
        stats["penalty"] = penalty
        stats["scale"] = out.abs().mean().item()
        return loss + 0.01 * penalty, stats

    def log(self, stats):
        for name, value in stats.items():
            self.logged[name].append(value)

    def step(self, x, y):
        total, stats = self.losses(x, y)
        self.opt.zero_grad()
        total.backward()
        self.opt.step()
        self.log(stats)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(),
                          nn.Linear(256, 16))
    trainer = Trainer(model)
    for step in range(60):
        trainer.step(torch.randn(32, 64), torch.randn(32, 16))
    print(f"{float(trainer.logged['loss'][-1]):.6f}")


if __name__ == "__main__":
    main()
