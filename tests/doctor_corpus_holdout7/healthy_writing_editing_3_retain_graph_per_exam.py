# Source: https://github.com/EagleW/Writing-editing-Network/issues/3
#   code: "Writing-editing network/main.py" (_mask, train_batch, train_epoches) at the
#   repository's commit
# Adapted: the three functions kept (the cuda branches dropped, pprint kept; in _mask the mask is
#   a BoolTensor and argmax reads it as int, as torch 2.13 requires); the
#   writing-editing seq2seq model (FbSeq2seq with its attention encoder-decoder) replaced by
#   a small GRU encoder-decoder with the same call signature that also reads the previous
#   draft, the abstracts data set and DataLoader by 12 batches of 8 random title/abstract
#   token sequences, config by a namespace (num_exams=3, 2 epochs, clip 5.0); cpu, seeded.
import types
from pprint import pprint

import torch
import torch.nn as nn
from torch import optim

config = types.SimpleNamespace(num_exams=3, lr=1e-3, max_grad_norm=5.0, batch_size=8, epochs=2)
vocab_size = 200
args = types.SimpleNamespace(cuda=False)


class FbSeq2seq(nn.Module):
    def __init__(self, vocab_size, hidden=96):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.draft_encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.decoder = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, input_variable, prev_generated_seq, input_lengths, target_variable, teacher_forcing_ratio):
        _, h = self.encoder(self.embed(input_variable))
        if prev_generated_seq is not None:
            _, h_draft = self.draft_encoder(self.embed(prev_generated_seq))
            h = h + h_draft
        dec_out, _ = self.decoder(self.embed(target_variable[:, :-1]), h)
        decoder_outputs = torch.log_softmax(self.out(dec_out), dim=-1)
        return decoder_outputs, None, {}


torch.manual_seed(0)
model = FbSeq2seq(vocab_size)
criterion = nn.NLLLoss()
optimizer = optim.Adam(model.parameters(), lr=config.lr)


def _mask(prev_generated_seq):
    prev_mask = torch.eq(prev_generated_seq, 1)
    lengths = torch.argmax(prev_mask.int(),dim=1)
    max_len = prev_generated_seq.size(1)
    mask = []
    for i in range(prev_generated_seq.size(0)):
        if lengths[i] == 0:
            mask_line = [0] * max_len
        else:
            mask_line = [0] * lengths[i].item()
            mask_line.extend([1] * (max_len - lengths[i].item()))
        mask.append(mask_line)
    mask = torch.BoolTensor(mask)
    return prev_generated_seq.data.masked_fill_(mask, 0)

def train_batch(input_variable, input_lengths, target_variable, model,
                teacher_forcing_ratio):
    loss_list = []
    prev_generated_seq = None
    target_variable_reshaped = target_variable[:, 1:].contiguous().view(-1)

    for i in range(config.num_exams):
        decoder_outputs, _, other = \
            model(input_variable, prev_generated_seq, input_lengths,
                   target_variable, teacher_forcing_ratio)

        decoder_outputs_reshaped = decoder_outputs.view(-1, vocab_size)
        lossi = criterion(decoder_outputs_reshaped, target_variable_reshaped)
        loss_list.append(lossi.item())
        model.zero_grad()
        lossi.backward(retain_graph=True)
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        prev_generated_seq = torch.squeeze(torch.topk(decoder_outputs, 1, dim=2)[1]).view(-1, decoder_outputs.size(1))
        prev_generated_seq = _mask(prev_generated_seq)
    return loss_list


def train_epoches(dataset, model, n_epochs, teacher_forcing_ratio):
    train_loader = dataset
    model.train(True)
    prev_epoch_loss_list = [100] * config.num_exams
    for epoch in range(1, n_epochs + 1):
        epoch_examples_total = 0
        epoch_loss_list = [0] * config.num_exams
        for batch_idx, (source, target, input_lengths) in enumerate(train_loader):
            input_variables = source
            target_variables = target
            loss_list = train_batch(input_variables, input_lengths.tolist(),
                               target_variables, model, teacher_forcing_ratio)
            num_examples = len(source)
            epoch_examples_total += num_examples
            for i in range(config.num_exams):
                epoch_loss_list[i] += loss_list[i] * num_examples

        for i in range(config.num_exams):
            epoch_loss_list[i] /= float(epoch_examples_total)

        log_msg = "Finished epoch %d with losses:" % epoch
        print(log_msg)
        pprint(epoch_loss_list)
        if prev_epoch_loss_list[:-1] < epoch_loss_list[:-1]:
            break
        else:
            prev_epoch_loss_list = epoch_loss_list[:]


abstracts = [(torch.randint(2, vocab_size, (config.batch_size, 10)),
              torch.randint(2, vocab_size, (config.batch_size, 31)),
              torch.full((config.batch_size,), 10)) for _ in range(12)]
train_epoches(abstracts, model, config.epochs, teacher_forcing_ratio=1)
