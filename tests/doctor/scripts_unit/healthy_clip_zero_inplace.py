# Gradients clipped in place between backward and step, and cleared in place
# (zero_grad(set_to_none=False), then a hand-written p.grad.zero_() for a second model):
# every backward starts from zeros.
import torch
from torch import nn

torch.manual_seed(0)
enc = nn.Sequential(nn.Linear(10, 40), nn.ReLU(), nn.Linear(40, 6))
opt = torch.optim.SGD(enc.parameters(), lr=0.05, momentum=0.9)
for step in range(30):
    x = torch.randn(50, 10)
    loss = enc(x).pow(2).mean()
    opt.zero_grad(set_to_none=False)
    loss.backward()
    torch.nn.utils.clip_grad_value_(enc.parameters(), 0.5)
    opt.step()

head = [torch.randn(6, 3, requires_grad=True)]
for step in range(30):
    out = enc(torch.randn(50, 10)).detach() @ head[0]
    out.pow(2).mean().backward()
    with torch.no_grad():
        torch.nn.utils.clip_grad_norm_(head, 1.0)
        head[0] -= 0.1 * head[0].grad
        head[0].grad.zero_()
print(f"{loss.item():.4f}")
