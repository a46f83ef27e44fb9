import torch
from torch import nn


def batches(n):
    for _ in range(n):  # a fresh batch per step, as a loader makes them
        yield torch.randn(128, 2048), torch.randn(128, 1)


def fit(model, opt, epochs, steps):
    for epoch in range(epochs):
        outputs = []
        for x, y in batches(steps):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            outputs.append({"loss": loss.detach(), "input": x})  # the whole batch, every step
        print(epoch, round(float(torch.stack([o["loss"] for o in outputs]).mean()), 4))


torch.manual_seed(0)
model = nn.Linear(2048, 1)
fit(model, torch.optim.SGD(model.parameters(), lr=1e-3), epochs=3, steps=30)
