import random

import torch
import torch.nn as nn


def build(device):
    return nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                         nn.Linear(2048, 512)).to(device)


def train_with_dynamic_batches(model, device, steps=60):
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    kept = []
    for step in range(steps):
        batch = random.choice([64, 96, 160, 384, 1000, 1536, 2500, 4000])
        x = torch.randn(batch, 512, device=device)
        y = model(x)
        loss = (y - x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        kept.append(y[: batch // 8].detach().clone())
        if len(kept) > 8:
            kept.pop(0)
        if step % 10 == 0:
            print(f"step {step} batch {batch} loss {loss.item():.6f}")


if __name__ == "__main__":
    random.seed(1)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    train_with_dynamic_batches(build(dev), dev)
