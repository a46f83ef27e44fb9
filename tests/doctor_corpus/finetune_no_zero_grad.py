"""Fine-tune a small MLP classifier with Adam and a step scheduler."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    return p.parse_args()


def main():
    args = get_args()
    torch.manual_seed(0)
    x = torch.randn(1280, 100)
    y = (x[:, :10].sum(1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(100, 256), nn.ReLU(), nn.Linear(256, 2))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for epoch in range(args.epochs):
        correct = 0
        for xb, yb in loader:
            logits = model(xb)
            loss = criterion(logits, yb)
            loss.backward()
            optimizer.step()
            correct += (logits.argmax(1) == yb).sum().item()
        scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.6f} acc {correct / len(x):.4f}")


if __name__ == "__main__":
    main()
