import torch
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU())
for p in backbone.parameters():  # a loop of tensor work before any optimizer exists
    p.requires_grad_(False)
head = nn.Linear(64, 4)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
batches = [(torch.randn(16, 32), torch.randint(0, 4, (16,))) for _ in range(30)]
for x, y in batches:
    loss = nn.functional.cross_entropy(head(backbone(x)), y)
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
