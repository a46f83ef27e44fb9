# Source: https://github.com/galsang/BiDAF-pytorch/issues/13
#   code: model/ema.py (EMA) and run.py (train, test) at commit bdb5df2, the version the
#   issue asks about (test() without torch.set_grad_enabled(False), added later)
# Adapted: EMA, train and test kept as they are; BiDAF -> a small span model of the same call
#   (batch -> p1, p2 start/end logits over the context words: an embedding, a bidirectional
#   LSTM and two linear heads); SQuAD and its torchtext iterators -> random batches of 16
#   contexts of 30 word ids with start/end indices and ids (train_iter counts epochs); the
#   tensorboardX SummaryWriter -> a stand-in that keeps nothing; evaluate.main -> exact match
#   and F1 against random gold answers, without writing the prediction file; 2 epochs of 30
#   batches, print_freq 20, dev set of 3 batches; cpu, seeded.
import copy
import random
from types import SimpleNamespace

import torch
from torch import nn, optim


class EMA():
    def __init__(self, mu):
        self.mu = mu
        self.shadow = {}

    def register(self, name, val):
        self.shadow[name] = val.clone()

    def get(self, name):
        return self.shadow[name]

    def update(self, name, x):
        assert name in self.shadow
        new_average = (1.0 - self.mu) * x + self.mu * self.shadow[name]
        self.shadow[name] = new_average.clone()


class BiDAF(nn.Module):
    def __init__(self, args, vectors):
        super(BiDAF, self).__init__()
        self.word_emb = nn.Embedding.from_pretrained(vectors, freeze=True)
        self.context_LSTM = nn.LSTM(vectors.size(1), args.hidden_size, batch_first=True,
                                    bidirectional=True)
        self.p1_weight = nn.Linear(args.hidden_size * 2, 1)
        self.p2_weight = nn.Linear(args.hidden_size * 2, 1)

    def forward(self, batch):
        c, _ = self.context_LSTM(self.word_emb(batch.c_word[0]))
        return self.p1_weight(c).squeeze(2), self.p2_weight(c).squeeze(2)


class Iterator:
    def __init__(self, batches, epochs):
        self.batches, self.epochs, self.epoch = batches, epochs, 0

    def __iter__(self):
        while True:
            for b in self.batches:
                yield b
            self.epoch += 1
            if self.epoch > self.epochs:
                return


def make_batch(g, n, c_len, vocab):
    s = torch.randint(0, c_len - 5, (n,), generator=g)
    return SimpleNamespace(c_word=(torch.randint(0, vocab, (n, c_len), generator=g),),
                           s_idx=s, e_idx=s + torch.randint(0, 5, (n,), generator=g),
                           id=['q%d' % random.randrange(10**6) for _ in range(n)])


class SummaryWriter:
    def __init__(self, log_dir=None):
        pass

    def add_scalar(self, tag, value, step):
        pass

    def close(self):
        pass


class evaluate:
    @staticmethod
    def main(args):
        em = random.random() * 100
        return {'exact_match': em, 'f1': min(100.0, em + 10 * random.random())}


def train(args, data):
    device = torch.device("cpu")
    model = BiDAF(args, data.WORD.vocab.vectors).to(device)

    ema = EMA(args.exp_decay_rate)
    for name, param in model.named_parameters():
        if param.requires_grad:
            ema.register(name, param.data)
    parameters = filter(lambda p: p.requires_grad, model.parameters())
    optimizer = optim.Adadelta(parameters, lr=args.learning_rate)
    criterion = nn.CrossEntropyLoss()

    writer = SummaryWriter(log_dir='runs/' + args.model_time)

    model.train()
    loss, last_epoch = 0, -1
    max_dev_exact, max_dev_f1 = -1, -1

    iterator = data.train_iter
    for i, batch in enumerate(iterator):
        present_epoch = int(iterator.epoch)
        if present_epoch == args.epoch:
            break
        if present_epoch > last_epoch:
            print('epoch:', present_epoch + 1)
        last_epoch = present_epoch

        p1, p2 = model(batch)

        optimizer.zero_grad()
        batch_loss = criterion(p1, batch.s_idx) + criterion(p2, batch.e_idx)
        loss += batch_loss.item()
        batch_loss.backward()
        optimizer.step()

        for name, param in model.named_parameters():
            if param.requires_grad:
                ema.update(name, param.data)

        if (i + 1) % args.print_freq == 0:
            dev_loss, dev_exact, dev_f1 = test(model, ema, args, data)
            c = (i + 1) // args.print_freq

            writer.add_scalar('loss/train', loss, c)
            writer.add_scalar('loss/dev', dev_loss, c)
            writer.add_scalar('exact_match/dev', dev_exact, c)
            writer.add_scalar('f1/dev', dev_f1, c)
            print(f'train loss: {loss:.3f} / dev loss: {dev_loss:.3f}'
                  f' / dev EM: {dev_exact:.3f} / dev F1: {dev_f1:.3f}')

            if dev_f1 > max_dev_f1:
                max_dev_f1 = dev_f1
                max_dev_exact = dev_exact
                best_model = copy.deepcopy(model)

            loss = 0
            model.train()

    writer.close()
    print(f'max dev EM: {max_dev_exact:.3f} / max dev F1: {max_dev_f1:.3f}')

    return best_model


def test(model, ema, args, data):
    device = torch.device("cpu")
    criterion = nn.CrossEntropyLoss()
    loss = 0
    answers = dict()
    model.eval()

    backup_params = EMA(0)
    for name, param in model.named_parameters():
        if param.requires_grad:
            backup_params.register(name, param.data)
            param.data.copy_(ema.get(name))

    for batch in iter(data.dev_iter):
        p1, p2 = model(batch)
        batch_loss = criterion(p1, batch.s_idx) + criterion(p2, batch.e_idx)
        loss += batch_loss.item()

        # (batch, c_len, c_len)
        batch_size, c_len = p1.size()
        ls = nn.LogSoftmax(dim=1)
        mask = (torch.ones(c_len, c_len) * float('-inf')).to(device).tril(-1).unsqueeze(0).expand(batch_size, -1, -1)
        score = (ls(p1).unsqueeze(2) + ls(p2).unsqueeze(1)) + mask
        score, s_idx = score.max(dim=1)
        score, e_idx = score.max(dim=1)
        s_idx = torch.gather(s_idx, 1, e_idx.view(-1, 1)).squeeze()

        for i in range(batch_size):
            id = batch.id[i]
            answer = batch.c_word[0][i][s_idx[i]:e_idx[i]+1]
            answer = ' '.join([data.WORD.vocab.itos[idx] for idx in answer])
            answers[id] = answer

    for name, param in model.named_parameters():
        if param.requires_grad:
            param.data.copy_(backup_params.get(name))

    results = evaluate.main(args)
    return loss, results['exact_match'], results['f1']


random.seed(0)
torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
vocab = 500
args = SimpleNamespace(hidden_size=32, epoch=2, exp_decay_rate=0.999, learning_rate=0.5,
                       print_freq=20, model_time='run')
WORD = SimpleNamespace(vocab=SimpleNamespace(vectors=torch.randn(vocab, 50),
                                             itos=['w%d' % k for k in range(vocab)]))
data = SimpleNamespace(WORD=WORD,
                       train_iter=Iterator([make_batch(g, 16, 30, vocab) for _ in range(30)], 2),
                       dev_iter=[make_batch(g, 16, 30, vocab) for _ in range(3)])
best_model = train(args, data)
