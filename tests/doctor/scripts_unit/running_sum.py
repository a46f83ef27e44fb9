import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total = 0.0
for step in range(24):
    x = torch.randn(256, 32)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss
print(f"{total.item():.6f}")
