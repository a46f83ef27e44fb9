# Source: https://github.com/pytorch/pytorch/issues/1887
# Adapted: the test code kept as posted; `Variable(...)` -> a plain tensor (Variable is the
#   tensor since PyTorch 0.4), `.cuda()` dropped (cpu), Python 2 `print num + 1` -> print(),
#   `while True` -> 1500 iterations, printing every 250; seeded.
import torch
import torch.nn as nn

torch.manual_seed(0)
encoder = nn.GRU(100, 100)

hidden = torch.randn(1, 1, 100)
output = ''

num = 0
while num < 1500:
    output, hidden = encoder(hidden, hidden)
    if num % 250 == 0:
        print(num + 1)
    num +=1
