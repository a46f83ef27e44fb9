import torch
from torch import nn


class Worker:
    def __init__(self, size):
        self.buffer = torch.randn(size, size)

        def on_done(result):
            return self.buffer.sum() + result

        self.callbacks = {}
        self.callbacks["done"] = on_done


model = nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(40):
    worker = Worker(256)
    loss = model(torch.randn(16, 64)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"{loss.item():.4f}")
