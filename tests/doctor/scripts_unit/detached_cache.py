import torch
from torch import nn


def main():
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(64, 512), nn.ReLU())
    head = nn.Linear(512, 1)
    opt = torch.optim.SGD(list(encoder.parameters()) + list(head.parameters()), lr=0.01)
    memo = {}
    for step in range(24):
        x = torch.randn(128, 64)
        feats = encoder(x)
        memo[step] = feats.detach()
        loss = head(feats).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"{loss.item():.6f}")


if __name__ == "__main__":
    main()
