import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class NoisyDigits(Dataset):
    def __init__(self, n=1024, side=28, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.rand(n, side * side, generator=g)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i]


class AutoEncoder(nn.Module):
    def __init__(self, d=784, hidden=128, code=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, code))
        self.dec = nn.Sequential(nn.Linear(code, hidden), nn.ReLU(), nn.Linear(hidden, d),
                                 nn.Sigmoid())

    def forward(self, x):
        return self.dec(self.enc(x))


def run_epoch(model, loader, optimizer):
    total_mse = 0.0
    total_l1 = 0.0
    for x in loader:
        recon = model(x)
        loss = F.l1_loss(recon, x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total_l1 += loss.item()
        total_mse += F.mse_loss(recon, x)
    return total_l1 / len(loader), total_mse / len(loader)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(NoisyDigits(), batch_size=64, shuffle=True)
    model = AutoEncoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        l1, mse = run_epoch(model, loader, optimizer)
        print(f"epoch {epoch}: l1={l1:.6f} mse={mse.item():.6f}")
