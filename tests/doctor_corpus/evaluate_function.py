import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

predictions = []


class Regression(Dataset):
    def __init__(self, n, d=64, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, d, generator=g)
        self.y = self.x.pow(2).sum(1, keepdim=True) / d

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def evaluate(model, loader, loss_fn):
    model.eval()
    total = 0.0
    for x, y in loader:
        out = model(x)
        predictions.append(out)
        total += loss_fn(out, y).item() * len(x)
    model.train()
    return total / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(0)
    train_loader = DataLoader(Regression(256), batch_size=64, shuffle=True)
    val_loader = DataLoader(Regression(256, seed=1), batch_size=128)
    model = nn.Sequential(nn.Linear(64, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(),
                          nn.Linear(512, 1))
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        print(f"epoch {epoch} val_mse {evaluate(model, val_loader, loss_fn):.6f}")


if __name__ == "__main__":
    main()
