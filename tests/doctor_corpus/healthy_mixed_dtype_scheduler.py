"""A float32 encoder with a float64 calibration head, OneCycle schedule."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Calibrated(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(96, 384), nn.GELU(), nn.Linear(384, 64))
        self.head = nn.Linear(64, 1).double()

    def forward(self, x):
        return self.head(self.encoder(x).double())


def main(epochs=2):
    torch.manual_seed(0)
    x = torch.randn(1280, 96)
    y = (x[:, :4].prod(1, keepdim=True) > 0).double()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = Calibrated()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3,
                                                    total_steps=epochs * len(loader))
    loss_fn = nn.BCEWithLogitsLoss()
    for epoch in range(epochs):
        for xb, yb in loader:
            loss = loss_fn(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.8f} lr {scheduler.get_last_lr()[0]:.6f}")


if __name__ == "__main__":
    main()
