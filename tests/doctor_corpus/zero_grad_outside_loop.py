import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class Shapes(Dataset):
    def __init__(self, n=1280):
        g = torch.Generator().manual_seed(0)
        self.x = torch.rand(n, 1, 16, 16, generator=g)
        self.y = (self.x.mean((1, 2, 3)) > 0.5).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def fit(model, loader, epochs=2):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()
    optimizer.zero_grad()
    for epoch in range(epochs):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.6f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    fit(ConvNet(), DataLoader(Shapes(), batch_size=64, shuffle=True))
