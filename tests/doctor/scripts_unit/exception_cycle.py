import torch
from torch import nn


def train_step(model, opt, x, step):
    failure = None
    try:
        hidden = model(x)
        if hidden.shape[0] > 0:
            raise ValueError(f"non-finite values at step {step}")
    except ValueError as exc:
        failure = exc
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item(), failure is not None


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 1024), nn.Tanh())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(24):
        x = torch.randn(64, 128)
        loss, failed = train_step(model, opt, x, step)
    print(f"{loss:.6f} {failed}")


main()
