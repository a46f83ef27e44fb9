# Sums squared-loss gradients over batches into .grad on purpose (a Fisher-style
# importance estimate): backward() every batch, no optimizer, no update, no zero_grad.
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Conv1d(4, 16, 5), nn.Tanh(), nn.Flatten(), nn.Linear(16 * 60, 3))
batches = [(torch.randn(32, 4, 64), torch.randint(0, 3, (32,))) for _ in range(6)]
seen = 0
for epoch in range(6):
    for x, y in batches:
        nn.functional.cross_entropy(net(x), y).backward()
        seen += 1
importance = {name: p.grad.pow(2) / seen for name, p in net.named_parameters()}
print(sorted((k, round(v.sum().item(), 4)) for k, v in importance.items())[:2])
