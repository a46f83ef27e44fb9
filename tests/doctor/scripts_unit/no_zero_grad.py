import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.001)
opt.zero_grad()
for step in range(30):
    x = torch.randn(64, 16)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
print(f"{loss.item():.6f}")
