"""The same training script, written so that memory stays flat:

    torchmem doctor examples/healthy_train.py
"""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main(epochs: int = 3) -> None:
    torch.manual_seed(0)
    x = torch.randn(1024, 64)
    y = torch.randint(0, 1000, (1024,))
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)

    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 1000))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(epochs):
        correct, seen = 0, 0
        for xb, yb in loader:
            logits = model(xb)
            loss = loss_fn(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += (logits.argmax(dim=1) == yb).sum().item()
            seen += len(yb)
        print(f"epoch {epoch}: loss {loss.item():.4f} train accuracy {correct / seen:.3f}")


if __name__ == "__main__":
    main()
