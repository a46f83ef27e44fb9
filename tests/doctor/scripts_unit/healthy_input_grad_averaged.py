import torch
from torch import nn


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 1))
saliency = []
for sample in range(10):
    x = torch.randn(1, 32, requires_grad=True)
    for _ in range(16):  # SmoothGrad: the gradients of noisy copies summed on purpose
        model(x + 0.1 * torch.randn_like(x)).sum().backward()
    saliency.append((x.grad / 16).abs().squeeze(0))
print(round(float(torch.stack(saliency).mean()), 4))
