from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


class EmbeddingCache:
    def __init__(self, encoder, capacity=16):
        self.encoder = encoder
        self.capacity = capacity
        self.entries = OrderedDict()

    def get(self, key, x):
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        with torch.no_grad():
            value = self.encoder(x)
        self.entries[key] = value
        if len(self.entries) > self.capacity:
            self.entries.popitem(last=False)
        return value


def main():
    torch.manual_seed(0)
    frozen = nn.Sequential(nn.Linear(64, 1024), nn.ReLU()).eval()
    cache = EmbeddingCache(frozen)
    head = nn.Linear(1024, 10)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    documents = torch.randn(400, 64, 64)
    for step in range(40):
        doc_id = step * 7 % 400
        feats = cache.get(doc_id, documents[doc_id])
        target = torch.randint(0, 10, (64,))
        loss = F.cross_entropy(head(feats), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.6f} cached {len(cache.entries)}")


if __name__ == "__main__":
    main()
