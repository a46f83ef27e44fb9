import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(12, 48), nn.GELU(), nn.Linear(48, 4))
opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
use_amp = False
for it in range(32):
    x, y = torch.randn(40, 12), torch.randint(0, 4, (40,))
    loss = nn.functional.cross_entropy(net(x), y)
    if use_amp:
        opt.zero_grad()
        loss.backward()
        opt.step()
    else:
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
print(f"{loss.item():.4f}")
