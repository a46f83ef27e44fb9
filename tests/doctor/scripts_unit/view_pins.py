import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(256, 256)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
firsts = []
for step in range(24):
    batch = torch.randn(512, 256)
    loss = model(batch).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    firsts.append(batch[0, :4])
print(f"{loss.item():.6f}")
