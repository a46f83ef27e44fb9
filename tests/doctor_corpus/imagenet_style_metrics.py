import argparse
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def build_model(num_classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(32, num_classes),
    )


def main():
    parser = argparse.ArgumentParser(description="tiny image classifier")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--classes", type=int, default=1000)
    args = parser.parse_args()

    torch.manual_seed(1)
    images = torch.randn(args.steps * 64, 3, 16, 16)
    labels = torch.randint(0, args.classes, (len(images),))
    loader = DataLoader(TensorDataset(images, labels), batch_size=64)

    model = build_model(args.classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    metrics = defaultdict(list)

    for step, (x, y) in enumerate(loader):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()

        probs = logits.softmax(dim=1)
        metrics["loss"].append(loss.item())
        metrics["confidence"].append(probs.max(dim=1).values.mean())
        metrics["lr"].append(scheduler.get_last_lr()[0])
        if step % 10 == 0:
            print(f"step {step} loss {metrics['loss'][-1]:.6f} "
                  f"conf {metrics['confidence'][-1].item():.6f}")


if __name__ == "__main__":
    main()
