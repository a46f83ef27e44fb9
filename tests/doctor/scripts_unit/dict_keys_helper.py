import time
from collections import defaultdict

import torch
from torch import nn


def track(history, out, loss):
    history["loss"].append(loss.item())
    history["probs"].append(out.softmax(-1).mean(0))


def fit(model, opt, epochs=3, batches=12):
    history = defaultdict(list)
    for epoch in range(epochs):
        start = time.perf_counter()
        for _ in range(batches):
            x = torch.randn(64, 32)
            out = model(x)
            loss = out.logsumexp(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            track(history, out, loss)
            for group in opt.param_groups:
                history[f"lr_{len(history)}"].append(group["lr"])
        history["epoch_time"].append(time.perf_counter() - start)
    return history


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 10))
print(len(fit(net, torch.optim.SGD(net.parameters(), lr=0.01))["probs"]))
