# Source: https://discuss.pytorch.org/t/gpu-memory-increase-while-i-wanna-to-backward-with-accumulative-loss/43284
# Adapted: the poster's loop `loss += criteria(seq_i)` then `loss.backward()` over sequences of
#   different lengths made runnable: a small GRU tagger, random sequences of 5-40 steps, 8
#   sequences per batch, 40 batches with Adam, cuda -> cpu, seeded.
import random

import torch
import torch.nn as nn

random.seed(0)
torch.manual_seed(0)


class Tagger(nn.Module):
    def __init__(self, n_in=16, n_hidden=64, n_out=5):
        super().__init__()
        self.rnn = nn.GRU(n_in, n_hidden, batch_first=True)
        self.out = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.out(h)


model = Tagger()
criteria = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for step in range(40):
    batch = []
    for _ in range(8):
        length = random.randint(5, 40)
        batch.append((torch.randn(1, length, 16), torch.randint(0, 5, (length,))))
    optimizer.zero_grad()
    loss = 0
    for seq_i, target_i in batch:
        loss_part = criteria(model(seq_i)[0], target_i)
        loss += loss_part
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(step, loss.item())
