import torch
from torch import nn

CACHE = {}


class Features:
    def __init__(self, key):
        self.key = key
        self.rows = [[float(i % 7) / 7.0 + key for i in range(200)] for _ in range(key % 8 + 8)]


def featurize(key):
    if key in CACHE:
        return CACHE[key]
    feats = Features(key)
    CACHE[key] = feats
    return feats


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    total = 0.0
    with torch.no_grad():
        for batch in range(48):
            keys = range(batch * 32, batch * 32 + 32)  # inputs never seen before
            x = torch.tensor([featurize(k).rows[0][:64] for k in keys])
            total += float(model(x).sum())
    print(f"{total:.3f} {len(CACHE)}")


if __name__ == "__main__":
    main()
