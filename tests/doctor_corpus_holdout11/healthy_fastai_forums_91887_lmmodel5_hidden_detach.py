# Source: https://forums.fast.ai/t/rnn-hidden-state-initializations-chapter-12/91887
#   code: LMModel5 as posted (fastbook chapter 12, "Multilayer RNNs"), with the chapter's
#   training setup (the ModelResetter callback and LMDataLoader order of the human-numbers data)
# Adapted: LMModel5 kept as posted, with the `x` of its forward read from `input_x`, the chapter's
#   `bs` and its reset() restoring zeros of the state's shape; fastai's Learner.fit_one_cycle
#   written as a plain loop that calls reset() at each epoch start and in validation (what
#   ModelResetter does), the human-numbers text by 2400 random tokens of a 30-word vocabulary cut
#   into contiguous batches of 16 sequences of 16 tokens, 3 epochs, Adam; cpu, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F

bs = 16
sl = 16


class LMModel5(nn.Module):
    def __init__(self, vocab_sz, n_hidden, n_layers):
        super().__init__()
        self.i_h = nn.Embedding(vocab_sz, n_hidden)
        self.rnn = nn.RNN(n_hidden, n_hidden, n_layers, batch_first=True)
        self.h_o = nn.Linear(n_hidden, vocab_sz)
        self.h = torch.zeros(n_layers, bs, n_hidden)

    def forward(self, input_x):
        x = input_x
        res, h = self.rnn(self.i_h(x), self.h)
        self.h = h.detach()
        return self.h_o(res)

    def reset(self):
        self.h = torch.zeros_like(self.h)


def group_chunks(ds, bs):
    m = len(ds) // bs
    new_ds = []
    for i in range(m):
        new_ds += [ds[i + m * j] for j in range(bs)]
    return new_ds


torch.manual_seed(0)
vocab = 30
nums = torch.randint(0, vocab, (2400 + 1,))
seqs = [(nums[i:i + sl], nums[i + 1:i + sl + 1]) for i in range(0, len(nums) - sl - 1, sl)]
cut = int(len(seqs) * 0.8)
train_seqs = group_chunks(seqs[:cut], bs)
valid_seqs = group_chunks(seqs[cut:], bs)


def batches(ds):
    for i in range(0, len(ds) - bs + 1, bs):
        xb = torch.stack([x for x, _ in ds[i:i + bs]])
        yb = torch.stack([y for _, y in ds[i:i + bs]])
        yield xb, yb


def loss_func(inp, targ):
    return F.cross_entropy(inp.view(-1, vocab), targ.view(-1))


model = LMModel5(vocab, 64, 2)
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(3):
    model.reset()
    model.train()
    for xb, yb in batches(train_seqs):
        loss = loss_func(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.reset()
    model.eval()
    with torch.no_grad():
        valid_loss = sum(loss_func(model(xb), yb).item() for xb, yb in batches(valid_seqs))
    print(epoch, loss.item(), valid_loss)
