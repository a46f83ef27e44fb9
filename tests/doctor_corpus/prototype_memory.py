"""Metric learning with class prototypes kept as a running memory of embeddings."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Embedder(nn.Module):
    def __init__(self, d_in=64, d_emb=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, 256), nn.ReLU(), nn.Linear(256, d_emb))

    def forward(self, x):
        return F.normalize(self.net(x), dim=1)


class PrototypeTracker:
    def __init__(self, num_classes, dim, momentum=0.9):
        self.memory = torch.zeros(num_classes, dim)
        self.momentum = momentum

    def update(self, emb, labels):
        onehot = F.one_hot(labels, self.memory.size(0)).float()
        counts = onehot.sum(0).clamp(min=1).unsqueeze(1)
        means = onehot.t() @ emb / counts
        self.memory = F.normalize(self.momentum * self.memory + (1 - self.momentum) * means, dim=1)

    def accuracy(self, emb, labels):
        return (emb @ self.memory.t()).argmax(1).eq(labels).float().mean().item()


def main():
    torch.manual_seed(0)
    num_classes = 512
    x = torch.randn(3200, 64)
    y = torch.randint(0, num_classes, (3200,))
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = Embedder()
    tracker = PrototypeTracker(num_classes, 128)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step, (xb, yb) in enumerate(loader):
        emb = model(xb)
        logits = emb @ emb.t() / 0.1
        same = yb.unsqueeze(0).eq(yb.unsqueeze(1)).float()
        loss = F.binary_cross_entropy_with_logits(logits, same)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tracker.update(emb, yb)
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.6f} proto-acc {tracker.accuracy(emb.detach(), yb):.4f}")


if __name__ == "__main__":
    main()
