import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

scores = []


def evaluate(model, loader):
    model.eval()
    predictions = []
    with torch.inference_mode():
        for x, _ in loader:
            predictions.append(model(x))
    model.train()
    return torch.cat(predictions)


def main():
    torch.manual_seed(0)
    x = torch.randn(1536, 64)
    y = x[:, :1].sign()
    train_loader = DataLoader(TensorDataset(x[:1280], y[:1280]), batch_size=32, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[1280:], y[1280:]), batch_size=128)
    model = nn.Sequential(nn.Linear(64, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(),
                          nn.Linear(512, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (xb, yb) in enumerate(train_loader):
        loss = nn.functional.soft_margin_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 4 == 0:
            preds = evaluate(model, val_loader)
            scores.append((preds.sign() == y[1280:]).float().mean().item())
    print(f"final loss {loss.item():.6f} val_acc {scores[-1]:.4f}")


if __name__ == "__main__":
    main()
