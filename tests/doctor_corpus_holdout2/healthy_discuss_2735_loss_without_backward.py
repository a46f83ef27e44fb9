# Source: https://discuss.pytorch.org/t/calling-loss-backward-reduce-memory-usage/2735
# Adapted: the thread's `while True: loss = model(input)` loop made runnable: a 3-layer MLP
#   on a random 128x512 input whose output is summed to a loss, 200 iterations instead of an
#   endless loop, a print every 50, cpu, seeded.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                      nn.Linear(1024, 10))
input = torch.randn(128, 512)

i = 0
while True:
    loss = model(input).pow(2).mean()
    i += 1
    if i % 50 == 0:
        print(i, loss.item())
    if i == 200:
        break
