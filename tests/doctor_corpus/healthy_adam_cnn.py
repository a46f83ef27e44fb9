import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class Patches(Dataset):
    def __init__(self, n=1280, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 3, 16, 16, generator=g)
        self.y = (self.x[:, 0].mean((1, 2)) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 4 * 4, 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(Patches(), batch_size=64, shuffle=True)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        running = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            running += loss.item()
        print(f"epoch {epoch} loss {running / len(loader):.6f}")
