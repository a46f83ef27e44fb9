import torch
from torch import nn


class RNNModel(nn.Module):
    def __init__(self, ntoken=100, ninp=32, nhid=64):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, num_layers=2)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden

    def init_hidden(self, bsz):
        return torch.zeros(2, bsz, 64), torch.zeros(2, bsz, 64)


def repackage(h):
    return tuple(v.detach() for v in h)


torch.manual_seed(0)
model = RNNModel()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train_data = torch.randint(0, 100, (600, 10))
val_data = torch.randint(0, 100, (240, 10))


def evaluate(source):
    model.eval()
    total = 0.0
    hidden = model.init_hidden(10)
    for i in range(0, len(source) - 21, 20):  # no torch.no_grad(): each graph is let go
        output, hidden = model(source[i:i + 20], hidden)
        total += nn.functional.cross_entropy(output.view(-1, 100), source[i + 1:i + 21].reshape(-1)).item()
        hidden = repackage(hidden)
    return total


for epoch in range(3):
    model.train()
    hidden = model.init_hidden(10)
    for i in range(0, len(train_data) - 21, 20):
        hidden = repackage(hidden)
        output, hidden = model(train_data[i:i + 20], hidden)
        loss = nn.functional.cross_entropy(output.view(-1, 100), train_data[i + 1:i + 21].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, round(evaluate(val_data), 2))
