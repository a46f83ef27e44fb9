import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_data(n, d=256, classes=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, classes, generator=g)
    return TensorDataset(x, (x @ w).argmax(1))


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(make_data(2560), batch_size=64, shuffle=True)
    val_x, val_y = make_data(512, seed=1).tensors
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    val_predictions = []
    best_acc = 0.0

    for step, (x, y) in enumerate(train_loader):
        model.train()
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if step % 4 == 0:
            model.eval()
            logits = model(val_x)
            val_predictions.append(logits)
            acc = (logits.argmax(1) == val_y).float().mean().item()
            best_acc = max(best_acc, acc)
            print(f"step {step} loss {loss.item():.6f} val_acc {acc:.4f}")

    ensemble = torch.stack(val_predictions[-3:]).mean(0)
    print(f"best {best_acc:.4f} ensemble {(ensemble.argmax(1) == val_y).float().mean().item():.4f}")


if __name__ == "__main__":
    main()
