# Source: https://github.com/fastai/fastbook/pull/469
# Adapted: LMModel3 of the book's chapter 12 as the pull request quotes it; fastai's Learner
#   with the ModelResetter callback -> a plain training loop that calls reset() at the start
#   of every epoch, as the callback does; the human-numbers data set -> random token ids
#   (vocabulary 30, 3 tokens in, the next token out), batch size 64, 2 epochs of 150 batches,
#   Adam, cpu, seeded.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class Module(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.__post_init__(*args, **kwargs)


class LMModel3(Module):
    def __post_init__(self, vocab_sz, n_hidden):
        self.i_h = nn.Embedding(vocab_sz, n_hidden)
        self.h_h = nn.Linear(n_hidden, n_hidden)
        self.h_o = nn.Linear(n_hidden,vocab_sz)
        self.h = 0

    def forward(self, x):
        for i in range(3):
            self.h = self.h + self.i_h(x[:,i])
            self.h = F.relu(self.h_h(self.h))
        out = self.h_o(self.h)
        self.h = self.h.detach()
        return out

    def reset(self): self.h = 0


vocab_sz, bs = 30, 64
model = LMModel3(vocab_sz, 64)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    model.reset()
    for it in range(150):
        xb = torch.randint(0, vocab_sz, (bs, 3))
        yb = torch.randint(0, vocab_sz, (bs,))
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
