"""Train a small transformer text classifier on synthetic token data."""

import argparse
import logging

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

log = logging.getLogger("textcls")


class TextClassifier(nn.Module):
    def __init__(self, vocab: int, dim: int, classes: int, layers: int = 3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=2 * dim,
                                           dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens))
        return self.head(h.mean(dim=1))


def make_loader(n: int, seq: int, vocab: int, batch_size: int) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (n, seq), generator=g)
    labels = (tokens[:, 0] % 4)
    return DataLoader(TensorDataset(tokens, labels), batch_size=batch_size, shuffle=True,
                      generator=g)


def train(model, loader, epochs: int, lr: float):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for epoch in range(epochs):
        model.train()
        for tokens, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(tokens), labels)
            loss.backward()
            optimizer.step()
            losses.append(loss)
        avg = torch.stack(losses[-len(loader):]).mean().item()
        print(f"epoch {epoch} loss {avg:.6f}")
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.manual_seed(0)
    model = TextClassifier(vocab=500, dim=64, classes=4)
    loader = make_loader(n=240, seq=24, vocab=500, batch_size=16)
    train(model, loader, args.epochs, args.lr)
    log.info("done")


if __name__ == "__main__":
    main()
