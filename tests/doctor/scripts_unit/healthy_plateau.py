import collections

import torch
from torch import nn


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    recent = collections.deque(maxlen=5)
    history = []
    big = torch.randn(512, 512)
    for step in range(24):
        x = torch.randn(128, 64) + big[: 128, :64] * 0
        loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (128,)))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        recent.append(loss.detach())
        history.append(loss.item())
    print(f"{sum(history) / len(history):.6f}")


if __name__ == "__main__":
    main()
