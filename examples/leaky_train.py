"""A small training script with a memory problem. Find it with:

    torchmem doctor examples/leaky_train.py
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

    epoch_logits, epoch_labels = [], []
    for epoch in range(epochs):
        for xb, yb in loader:
            logits = model(xb)
            loss = loss_fn(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_logits.append(logits)
            epoch_labels.append(yb)
        accuracy = (torch.cat(epoch_logits).argmax(dim=1) == torch.cat(epoch_labels)).float().mean()
        print(f"epoch {epoch}: loss {loss.item():.4f} train accuracy {accuracy.item():.3f}")


if __name__ == "__main__":
    main()
