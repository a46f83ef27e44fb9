import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 16))
batches = [torch.randn(8, 32) for _ in range(60)]
bank = encoder(batches[0])
for x in batches[1:]:
    bank = torch.cat([bank, encoder(x)], dim=0)  # no backward: every batch's graph kept
print(tuple(bank.shape))
