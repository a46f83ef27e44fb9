import torch
from torch import nn


class Trial:
    def __init__(self, lr):
        self.model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.loss = None


def main():
    torch.manual_seed(0)
    trials = []
    for lr in (1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5):
        trial = Trial(lr)
        trials.append(trial)  # every trained trial kept, with its optimizer's state
        for step in range(12):
            x, y = torch.randn(32, 256), torch.randint(0, 4, (32,))
            loss = nn.functional.cross_entropy(trial.model(x), y)
            trial.opt.zero_grad()
            loss.backward()
            trial.opt.step()
        trial.loss = loss.item()
    print(min(t.loss for t in trials))


if __name__ == "__main__":
    main()
