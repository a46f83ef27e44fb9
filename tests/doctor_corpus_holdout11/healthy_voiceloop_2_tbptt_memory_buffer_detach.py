# Source: https://github.com/facebookarchive/loop/issues/2
#   code: train.py, model.py and data.py (TBPTTIter) at commit 1129755
# Adapted: Loop, Encoder, GravesAttention, Decoder, MaskedMSE, TBPTTIter and train() kept with
#   their names and structure, ported to current torch (Variable dropped, integer division,
#   reduction="sum" for size_average=False, Softmax(dim=1), loss.data[0] -> loss.item(),
#   clip_grad_norm_); tiny sizes (hidden 32, 16 output features, memory of 5 slots, 4 gaussians,
#   batch 4); the VCTK npz loader replaced by 6 random batches of phoneme ids and 40-frame
#   feature sequences cut into 10-frame TBPTT chunks; two epochs; visdom/tqdm/logging dropped;
#   cpu, seeded.
import argparse

import numpy
import torch
import torch.nn as nn
import torch.optim as optim
from torch.nn.utils.rnn import pack_padded_sequence as pack
from torch.nn.utils.rnn import pad_packed_sequence as unpack


def getLinear(dim_in, dim_out):
    return nn.Sequential(nn.Linear(dim_in, dim_in // 10), nn.ReLU(), nn.Linear(dim_in // 10, dim_out))


class MaskedMSE(nn.Module):
    def __init__(self):
        super(MaskedMSE, self).__init__()
        self.criterion = nn.MSELoss(reduction="sum")

    @staticmethod
    def _sequence_mask(sequence_length, max_len):
        batch_size = sequence_length.size(0)
        seq_range = torch.arange(0, max_len).long()
        seq_range_expand = seq_range.unsqueeze(0).expand(batch_size, max_len)
        seq_length_expand = sequence_length.unsqueeze(1).expand_as(seq_range_expand)
        return (seq_range_expand < seq_length_expand).t().float()

    def forward(self, input, target, lengths):
        max_len = input.size(0)
        mask = self._sequence_mask(lengths, max_len).unsqueeze(2)
        mask_ = mask.expand_as(input)
        self.loss = self.criterion(input * mask_, target * mask_)
        self.loss = self.loss / mask.sum()
        return self.loss


class Encoder(nn.Module):
    def __init__(self, opt):
        super(Encoder, self).__init__()
        self.lut_p = nn.Embedding(opt.vocabulary_size, opt.hidden_size, max_norm=1.0)
        self.lut_s = nn.Embedding(opt.nspk, opt.hidden_size, max_norm=1.0)

    def forward(self, input, speakers):
        lengths = input[1].data.view(-1).tolist()
        outputs = pack(self.lut_p(input[0]), lengths)
        outputs = unpack(outputs)[0]
        ident = self.lut_s(speakers)
        if ident.dim() == 3:
            ident = ident.squeeze(1)
        return outputs, ident


class GravesAttention(nn.Module):
    COEF = 0.3989422917366028

    def __init__(self, batch_size, mem_elem, K, attention_alignment):
        super(GravesAttention, self).__init__()
        self.K = K
        self.attention_alignment = attention_alignment
        self.epsilon = 1e-5
        self.sm = nn.Softmax(dim=1)
        self.N_a = getLinear(mem_elem, 3 * K)
        self.J = torch.arange(0, 500).float().expand(batch_size, self.K, 500)

    def forward(self, C, context, mu_tm1):
        gbk_t = self.N_a(C.view(C.size(0), C.size(1) * C.size(2)))
        gbk_t = gbk_t.view(gbk_t.size(0), -1, self.K)
        g_t, b_t, k_t = gbk_t[:, 0, :], gbk_t[:, 1, :], gbk_t[:, 2, :]
        g_t = self.sm(g_t) + self.epsilon
        sig_t = torch.exp(b_t) + self.epsilon
        mu_t = mu_tm1 + self.attention_alignment * torch.exp(k_t)
        g_t = g_t.unsqueeze(2).expand(g_t.size(0), g_t.size(1), context.size(1))
        sig_t = sig_t.unsqueeze(2).expand_as(g_t)
        mu_t_ = mu_t.unsqueeze(2).expand_as(g_t)
        j = self.J[:g_t.size(0), :, :context.size(1)]
        phi_t = g_t * torch.exp(-0.5 * sig_t * (mu_t_ - j) ** 2)
        alpha_t = self.COEF * torch.sum(phi_t, 1, keepdim=True)
        c_t = torch.bmm(alpha_t, context).transpose(0, 1).squeeze(0)
        return c_t, mu_t, alpha_t


class Decoder(nn.Module):
    def __init__(self, opt):
        super(Decoder, self).__init__()
        self.K, self.hidden_size, self.output_size = opt.K, opt.hidden_size, opt.output_size
        self.mem_size = opt.mem_size
        self.mem_feat_size = opt.output_size + opt.hidden_size
        self.mem_elem = self.mem_size * self.mem_feat_size
        self.attn = GravesAttention(opt.batch_size, self.mem_elem, self.K, opt.attention_alignment)
        self.N_o = getLinear(self.mem_elem, self.hidden_size)
        self.output = nn.Linear(self.hidden_size, self.output_size)
        self.N_u = getLinear(self.mem_elem, self.mem_feat_size)
        self.F_u = nn.Linear(self.hidden_size, self.hidden_size)
        self.F_o = nn.Linear(self.hidden_size, self.hidden_size)

    def init_buffer(self, ident, start=True):
        mem_feat_size = self.hidden_size + self.output_size
        batch_size = ident.size(0)
        if start:
            self.mu_t = ident.data.new(batch_size, self.K).zero_()
            self.S_t = ident.data.new(batch_size, mem_feat_size, self.mem_size).zero_()
            self.S_t[:, :self.hidden_size, :] = ident.unsqueeze(2).expand(ident.size(0), ident.size(1), self.mem_size)
        else:
            self.mu_t = self.mu_t.detach()
            self.S_t = self.S_t.detach()

    def update_buffer(self, S_tm1, c_t, o_tm1, ident):
        idt = torch.tanh(self.F_u(ident))
        o_tm1 = o_tm1.squeeze(0)
        z_t = torch.cat([c_t + idt, o_tm1 / 30], 1)
        z_t = z_t.unsqueeze(2)
        Sp = torch.cat([z_t, S_tm1[:, :, :-1]], 2)
        u = self.N_u(Sp.view(Sp.size(0), -1))
        u[:, :idt.size(1)] = u[:, :idt.size(1)] + idt
        u = u.unsqueeze(2)
        S = torch.cat([u, S_tm1[:, :, :-1]], 2)
        return S

    def forward(self, x, ident, context, start=True):
        out, attns = [], []
        self.init_buffer(ident, start)
        for o_tm1 in torch.split(x, 1):
            c_t, mu_t, alpha_t = self.attn(self.S_t, context.transpose(0, 1), self.mu_t)
            self.S_t = self.update_buffer(self.S_t, c_t, o_tm1, ident)
            self.mu_t = mu_t
            ot_out = self.N_o(self.S_t.view(self.S_t.size(0), -1))
            sp_out = self.F_o(ident)
            o_t = self.output(ot_out + sp_out)
            out += [o_t]
            attns += [alpha_t.squeeze()]
        return torch.stack(out), torch.stack(attns)


class Loop(nn.Module):
    def __init__(self, opt):
        super(Loop, self).__init__()
        self.encoder = Encoder(opt)
        self.decoder = Decoder(opt)
        self.noise = opt.noise

    def init_input(self, tgt, start):
        if start:
            self.x_tm1 = torch.zeros(1, tgt.size(1), tgt.size(2)).type_as(tgt.data)
        inp = torch.cat([self.x_tm1, tgt[:-1].data])
        if self.noise > 0:
            inp += tgt.data.new(inp.size()).normal_(0, self.noise)
        self.x_tm1 = tgt[-1].data.unsqueeze(0)
        return inp

    def forward(self, src, tgt, start=True):
        x = self.init_input(tgt, start)
        context, ident = self.encoder(src[0], src[1])
        return self.decoder(x, ident, context, start)


class TBPTTIter(object):
    def __init__(self, src, trgt, spkr, seq_len):
        self.seq_len, self.start, self.speakers = seq_len, True, spkr
        self.srcBatch, self.srcLenths = src[0], src[1]
        self.tgtBatch = list(torch.split(trgt[0], self.seq_len, 0))
        self.tgtBatch.reverse()
        self.len = len(self.tgtBatch)
        self.tgtLenths = [self.split_length(l, self.len) for l in trgt[1].tolist()]
        self.tgtLenths = [x.squeeze(1) for x in torch.split(torch.stack(self.tgtLenths), 1, 1)]
        self.tgtLenths.reverse()

    def split_length(self, seq_size, batch_seq_len):
        seq = [self.seq_len] * (seq_size // self.seq_len)
        if seq_size % self.seq_len != 0:
            seq += [seq_size % self.seq_len]
        seq += [0] * (batch_seq_len - len(seq))
        return torch.LongTensor(seq)

    def __next__(self):
        if len(self.tgtBatch) == 0:
            raise StopIteration()
        if self.len > len(self.tgtBatch):
            self.start = False
        return (self.srcBatch, self.srcLenths), (self.tgtBatch.pop(), self.tgtLenths.pop()), self.speakers, self.start

    def __iter__(self):
        return self

    def __len__(self):
        return self.len


def check_grad(params, clip_th, ignore_th):
    befgad = torch.nn.utils.clip_grad_norm_(params, clip_th)
    return (not numpy.isfinite(befgad.item()) or (befgad > ignore_th))


args = argparse.Namespace(seq_len=10, batch_size=4, lr=1e-4, clip_grad=0.5, ignore_grad=10000.0,
                          vocabulary_size=44, output_size=16, hidden_size=32, K=4, noise=4,
                          attention_alignment=0.05, nspk=3, mem_size=5)
torch.manual_seed(1)
train_loader = []
for _ in range(6):
    txt_len = torch.tensor([30, 28, 25, 22])
    feat_len = torch.tensor([40, 37, 33, 30])
    train_loader.append(((torch.randint(0, 44, (30, 4)), txt_len),
                         (torch.randn(40, 4, args.output_size), feat_len),
                         torch.randint(0, args.nspk, (4,))))


def train(model, criterion, optimizer, epoch, train_losses):
    total = 0
    model.train()
    for full_txt, full_feat, spkr in train_loader:
        batch_iter = TBPTTIter(full_txt, full_feat, spkr, args.seq_len)
        batch_total = 0
        for txt, feat, spkr, start in batch_iter:
            input, target = txt, feat
            if start:
                optimizer.zero_grad()
            output, _ = model([input, spkr], target[0], start)
            loss = criterion(output, target[0], target[1])
            loss.backward()
            if check_grad(model.parameters(), args.clip_grad, args.ignore_grad):
                optimizer.zero_grad()
                continue
            optimizer.step()
            batch_total += loss.item()
        batch_total = batch_total / len(batch_iter)
        total += batch_total
    avg = total / len(train_loader)
    train_losses.append(avg)
    print('====> Train set loss: {:.4f} (epoch {})'.format(avg, epoch))


model = Loop(args)
criterion = MaskedMSE()
optimizer = optim.Adam(model.parameters(), lr=args.lr)
train_losses = []
for epoch in range(1, 3):
    train(model, criterion, optimizer, epoch, train_losses)
