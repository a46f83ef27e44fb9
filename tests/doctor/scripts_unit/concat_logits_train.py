import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
seen = torch.empty(0, 64)
for step in range(60):
    x, y = torch.randn(16, 32), torch.randint(0, 64, (16,))
    logits = net(x)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    seen = torch.cat([seen, logits])  # each step's logits joined on with their graph
print(tuple(seen.shape))
