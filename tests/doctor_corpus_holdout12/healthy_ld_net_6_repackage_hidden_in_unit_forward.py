# Source: https://github.com/LiyuanLucasLiu/LD-Net/issues/6
#   code: train_lm.py, model_word_ada/LM.py, model_word_ada/basic.py, model_word_ada/utils.py
# Adapted: the adaptive softmax is replaced by a plain linear softmax with the same forward(out, target)
# interface, the data loader by a small stub that yields random word/label batches and exposes cur_idx,
# the page writer/tensorboard calls are dropped; vocabulary 2000, 2 LSTM layers of 256, 2 epochs of
# 60 batches plus an evaluation pass per epoch on CPU.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def repackage_hidden(h):
    if type(h) == torch.Tensor:
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def to_scalar(var):
    return var.view(-1).item()


class BasicUnit(nn.Module):
    def __init__(self, unit, input_dim, hid_dim, droprate):
        super(BasicUnit, self).__init__()
        self.unit_type = unit
        rnnunit_map = {'rnn': nn.RNN, 'lstm': nn.LSTM, 'gru': nn.GRU}
        self.layer = rnnunit_map[unit](input_dim, hid_dim, 1)
        self.droprate = droprate
        self.output_dim = hid_dim
        self.init_hidden()

    def init_hidden(self):
        self.hidden_state = None

    def forward(self, x):
        out, new_hidden = self.layer(x, self.hidden_state)

        self.hidden_state = repackage_hidden(new_hidden)

        if self.droprate > 0:
            out = F.dropout(out, p=self.droprate, training=self.training)

        return out


class BasicRNN(nn.Module):
    def __init__(self, layer_num, unit, emb_dim, hid_dim, droprate):
        super(BasicRNN, self).__init__()
        layer_list = [BasicUnit(unit, emb_dim, hid_dim, droprate)] + [BasicUnit(unit, hid_dim, hid_dim, droprate) for i in range(layer_num - 1)]
        self.layer = nn.Sequential(*layer_list)
        self.output_dim = layer_list[-1].output_dim
        self.init_hidden()

    def init_hidden(self):
        for tup in self.layer.children():
            tup.init_hidden()

    def forward(self, x):
        return self.layer(x)


class SoftMax(nn.Module):
    def __init__(self, w_num, input_dim):
        super(SoftMax, self).__init__()
        self.out = nn.Linear(input_dim, w_num)

    def forward(self, x, target):
        return F.cross_entropy(self.out(x), target)


class LM(nn.Module):
    def __init__(self, rnn, soft_max, w_num, w_dim, droprate):
        super(LM, self).__init__()
        self.rnn = rnn
        self.soft_max = soft_max
        self.word_embed = nn.Embedding(w_num, w_dim)
        self.rnn_output = self.rnn.output_dim
        self.drop = nn.Dropout(p=droprate)

    def init_hidden(self):
        self.rnn.init_hidden()

    def forward(self, w_in, target):
        w_emb = self.word_embed(w_in)
        w_emb = self.drop(w_emb)
        out = self.rnn(w_emb).contiguous().view(-1, self.rnn_output)
        out = self.soft_max(out, target)
        return out


class LargeDataset:
    def __init__(self, num_batch, seq_len=35, batch_size=32, w_num=2000):
        self.num_batch, self.seq_len, self.batch_size, self.w_num = num_batch, seq_len, batch_size, w_num
        self.cur_idx = 0

    def get_tqdm(self, device):
        for self.cur_idx in range(1, self.num_batch + 1):
            word_t = torch.randint(0, self.w_num, (self.seq_len, self.batch_size), device=device)
            label_t = torch.randint(0, self.w_num, (self.seq_len, self.batch_size), device=device)
            yield word_t, label_t


def evaluate(data_loader, lm_model, limited=76800):
    lm_model.eval()
    lm_model.init_hidden()
    total_loss = 0
    total_len = 0
    for word_t, label_t in data_loader:
        label_t = label_t.view(-1)
        tmp_len = label_t.size(0)
        total_loss += tmp_len * lm_model(word_t, label_t).item()
        total_len += tmp_len
        if limited >= 0 and total_len > limited:
            break
    ppl = math.exp(total_loss / total_len)
    return ppl


device = torch.device("cpu")
rnn_layer = BasicRNN(2, 'lstm', 128, 256, 0.1)
lm_model = LM(rnn_layer, SoftMax(2000, 256), 2000, 128, 0.1)
optimizer = torch.optim.Adam(lm_model.parameters(), lr=1e-3)
train_loader, test_loader = LargeDataset(60), LargeDataset(10)
batch_index, epoch_loss, epoch_size = 0, 0, 20

for indexs in range(2):
    lm_model.train()
    for word_t, label_t in train_loader.get_tqdm(device):
        if 1 == train_loader.cur_idx:
            lm_model.init_hidden()
        label_t = label_t.view(-1)
        lm_model.zero_grad()
        loss = lm_model(word_t, label_t)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lm_model.parameters(), 5.0)
        optimizer.step()
        batch_index += 1
        epoch_loss += to_scalar(loss)
        if 0 == batch_index % epoch_size:
            print('train ppl', math.exp(epoch_loss / epoch_size))
            epoch_loss = 0
    test_ppl = evaluate(test_loader.get_tqdm(device), lm_model)
    print('epoch', indexs, 'test ppl', test_ppl)
