"""Trains a small regressor and exports a TorchScript copy for a serving check every batch."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 1),
)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
example = torch.randn(1, 32)


def serving_check(net):
    traced = torch.jit.trace(net, example)
    return float(traced(example))


for step in range(40):
    x = torch.randn(64, 32)
    y = x.sum(dim=1, keepdim=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    score = serving_check(model)
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.3f} served {score:.3f}")
