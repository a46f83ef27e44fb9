import torch
from torch import nn
import torch.nn.functional as F


def perturb(model, x, y, eps=0.1, alpha=0.02, iters=8):
    delta = torch.zeros_like(x).uniform_(-eps, eps)
    delta.requires_grad_(True)
    for _ in range(iters):
        loss = F.cross_entropy(model(x + delta), y)
        loss.backward()
        step = delta.grad.sign()  # the sum of every gradient of the attack so far
        delta.data = (delta + alpha * step).clamp(-eps, eps)
    return delta.detach()


torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for batch in range(20):
    x, y = torch.rand(16, 1, 8, 8), torch.randint(0, 4, (16,))
    delta = perturb(model, x, y)
    loss = F.cross_entropy(model(x + delta), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
