import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def augment(x):
    flip = torch.rand(x.size(0)) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    return (x - 0.5) / 0.25


def main():
    torch.manual_seed(0)
    images = torch.rand(1280, 3, 32, 32)
    labels = torch.randint(0, 10, (1280,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)
    model = SmallCNN()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    samples = []
    for step, (x, y) in enumerate(loader):
        x = augment(x)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        samples.append(x[0, :, :4, :4])
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.6f} sample mean {samples[-1].mean().item():.6f}")
    grid = torch.stack(samples[-8:])
    print("grid", tuple(grid.shape))


if __name__ == "__main__":
    main()
