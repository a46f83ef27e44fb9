"""Sequence regression on GPU with batches of random length (no bucketing)."""

import random
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F


class SeqModel(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.inp = nn.Linear(d, 4 * d)
        self.mid = nn.Linear(4 * d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.out(F.gelu(self.mid(F.gelu(self.inp(x)))))


def main():
    random.seed(0)
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = SeqModel().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    summaries = deque(maxlen=64)
    for step in range(60):
        length = random.randint(32, 2048)
        x = torch.randn(16, length, 256, device=device)
        loss = F.mse_loss(model(x), x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        summaries.append(torch.randn(length * 64, device=device))
        if step % 10 == 0:
            print(f"step {step} len {length} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
