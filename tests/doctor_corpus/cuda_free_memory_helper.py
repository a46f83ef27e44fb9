import gc

import torch
import torch.nn as nn
import torch.nn.functional as F


def free_memory():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class ConvClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))

    def forward(self, x):
        return self.body(x)


def train_one_epoch(model, optimizer, device, batches=50):
    model.train()
    for i in range(batches):
        x = torch.randn(64, 3, 64, 64, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        free_memory()
        if i % 10 == 0:
            print(f"batch {i} loss {loss.item():.6f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = ConvClassifier().to(device)
    train_one_epoch(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), device)
