import torch
import torch.nn as nn


class CharRNN(nn.Module):
    def __init__(self, vocab=96, hidden=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, 32)
        self.rnn = nn.LSTM(32, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, state):
        out, state = self.rnn(self.embed(x), state)
        return self.head(out), state


def repackage(state):
    return tuple(s.detach() for s in state)


def main(bptt=16, batch=16):
    torch.manual_seed(0)
    text = torch.randint(0, 96, (batch, bptt * 40 + 1))
    model = CharRNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    state = (torch.zeros(1, batch, 128), torch.zeros(1, batch, 128))
    for i in range(0, text.size(1) - 1 - bptt, bptt):
        x, y = text[:, i:i + bptt], text[:, i + 1:i + 1 + bptt]
        state = repackage(state)
        logits, state = model(x, state)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 96), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if (i // bptt) % 10 == 0:
            print(f"chunk {i // bptt} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
