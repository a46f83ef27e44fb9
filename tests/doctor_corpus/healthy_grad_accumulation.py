import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    tokens = torch.randint(0, 1000, (2560, 16))
    labels = torch.randint(0, 3, (2560,))
    loader = DataLoader(TensorDataset(tokens, labels), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.EmbeddingBag(1000, 128), nn.Linear(128, 512), nn.ReLU(),
                          nn.Linear(512, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    optimizer.zero_grad()
    for i, (tok, y) in enumerate(loader):
        loss = F.cross_entropy(model(tok), y) / args.accum
        loss.backward()
        if (i + 1) % args.accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
        if i % 40 == 0:
            print(f"micro-batch {i} loss {loss.item() * args.accum:.6f}")


if __name__ == "__main__":
    main()
