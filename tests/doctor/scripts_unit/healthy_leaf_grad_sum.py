# Sensitivity of a fixed linear model to its weights, averaged over many inputs: the
# gradients of leaf tensors are left to add up across backward() calls and read once.
import torch

torch.manual_seed(0)
weights = [torch.randn(48, 48, requires_grad=True), torch.randn(48, requires_grad=True)]
total = 0
while total < 40:
    x = torch.randn(128, 48)
    out = torch.relu(x @ weights[0] + weights[1])
    out.logsumexp(dim=1).mean().backward()
    total += 1
print([round(w.grad.abs().mean().item() / total, 6) for w in weights])
