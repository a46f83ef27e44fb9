from collections import deque

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    x = torch.randn(2560, 64)
    y = x @ torch.randn(64, 1) + 0.1 * torch.randn(2560, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    recent = deque(maxlen=20)
    for step, (xb, yb) in enumerate(loader):
        loss = nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        recent.append(loss.detach())
        if step % 10 == 0:
            print(f"step {step} smoothed {torch.stack(list(recent)).mean().item():.6f}")


if __name__ == "__main__":
    main()
