import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(48, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                    nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 12))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
outputs = []
for step in range(40):
    x, y = torch.randn(64, 48), torch.randn(64, 12)
    loss = F.mse_loss(net(x), y)
    outputs.append({"loss": loss, "n": x.size(0)})
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"{sum(o['loss'].item() for o in outputs) / len(outputs):.4f}")
