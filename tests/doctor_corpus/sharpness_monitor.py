"""Train an MLP regressor and track the gradient norm as a sharpness signal."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class GradientStats:
    def __init__(self, params):
        self.params = [p for p in params if p.requires_grad]
        self.norms = []

    def record(self):
        total = sum((p.grad ** 2).sum() for p in self.params if p.grad is not None)
        norm = torch.sqrt(total)
        self.norms.append(norm)
        return norm


def main():
    torch.manual_seed(0)
    x = torch.randn(2560, 64)
    y = torch.tanh(x[:, :8]).sum(1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 512), nn.SiLU(), nn.Linear(512, 512), nn.SiLU(),
                          nn.Linear(512, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    stats = GradientStats(model.parameters())
    loss_fn = nn.MSELoss()
    for step, (xb, yb) in enumerate(loader):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward(create_graph=True)
        gnorm = stats.record()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.6f} grad-norm {gnorm.item():.6f}")


if __name__ == "__main__":
    main()
