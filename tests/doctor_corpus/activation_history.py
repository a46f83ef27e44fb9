import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Encoder(nn.Module):
    def __init__(self, vocab=2000, dim=128, classes=5):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.proj = nn.Linear(dim, 1024)
        self.out = nn.Linear(1024, classes)

    def forward(self, tokens):
        h = F.relu(self.proj(self.emb(tokens)))
        return self.out(h), h


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    torch.manual_seed(0)
    tokens = torch.randint(0, 2000, (1280, 20))
    labels = torch.randint(0, 5, (1280,))
    loader = DataLoader(TensorDataset(tokens, labels), batch_size=args.batch_size, shuffle=True)
    model = Encoder()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    hidden_states = []
    for epoch in range(args.epochs):
        for tok, y in loader:
            logits, h = model(tok)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            hidden_states.append(h.detach())
        dead = (torch.cat(hidden_states[-len(loader):]) == 0).float().mean().item()
        print(f"epoch {epoch} loss {loss.item():.6f} dead-units {dead:.4f}")


if __name__ == "__main__":
    main()
