import torch
from torch import nn


class StepState:
    def __init__(self, model, x):
        self.out = model(x)
        self.report = lambda: float(self.out.mean())


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 512), nn.Tanh(), nn.Linear(512, 512))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(24):
        x = torch.randn(64, 128)
        state = StepState(model, x)
        loss = state.out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"{loss.item():.6f}")


main()
