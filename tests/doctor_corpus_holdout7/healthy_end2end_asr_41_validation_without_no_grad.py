# Source: https://github.com/gentaiscool/end2end-asr-pytorch/pull/41
#   code: trainer/asr/trainer.py (Trainer.train) and utils/metrics.py at commit 5a2b905^
#   (before the pull request wraps the validation forward in torch.no_grad())
# Adapted: Trainer.train kept with its training and validation loops (tqdm progress bars
#   replaced by plain iteration, save_model dropped, no clipping); calculate_metrics reduced to
#   its cross-entropy branch, calculate_cer/calculate_wer kept with a small edit distance in
#   place of python-Levenshtein's Lev.distance; the Transformer ASR model replaced by a GRU
#   encoder-decoder with the same call signature and return values (pred, gold, hyp_seq,
#   gold_seq); the NoamOpt wrapper by Adam with the _rate attribute the progress line reads;
#   constant.args by a namespace; LibriSpeech by 6 training and 8 validation batches of 4
#   random 40-dim feature sequences of 60 frames with 12-token transcripts; 2 epochs; cpu,
#   seeded.
import logging
import sys
import time
import types

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

constant = types.SimpleNamespace(PAD_TOKEN=0, SOS_CHAR='<', EOS_CHAR='>', USE_CUDA=False,
                                 args=types.SimpleNamespace(label_smoothing=0.0, name='asr', clip=False,
                                                            max_norm=400, save_every=5, shuffle=False))


def _distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def calculate_cer(s1, s2):
    return _distance(s1, s2)


def calculate_wer(s1, s2):
    b = set(s1.split() + s2.split())
    word2char = dict(zip(b, range(len(b))))

    w1 = [chr(word2char[w]) for w in s1.split()]
    w2 = [chr(word2char[w]) for w in s2.split()]

    return _distance(''.join(w1), ''.join(w2))


def calculate_metrics(pred, gold, input_lengths=None, target_lengths=None, smoothing=0.0, loss_type="ce"):
    pred = pred.view(-1, pred.size(2))
    gold = gold.contiguous().view(-1)
    loss = F.cross_entropy(pred, gold, ignore_index=constant.PAD_TOKEN, reduction="mean")
    pred = pred.max(1)[1]
    non_pad_mask = gold.ne(constant.PAD_TOKEN)
    num_correct = pred.eq(gold).masked_select(non_pad_mask).sum().item()
    return loss, num_correct


class Transformer(nn.Module):
    def __init__(self, dim_input=40, dim_model=128, vocab=30):
        super().__init__()
        self.encoder = nn.GRU(dim_input, dim_model, batch_first=True)
        self.embedding = nn.Embedding(vocab, dim_model)
        self.decoder = nn.GRU(dim_model, dim_model, batch_first=True)
        self.output = nn.Linear(dim_model, vocab)

    def forward(self, src, src_lengths, tgt, verbose=False):
        _, h = self.encoder(src.squeeze(1).transpose(1, 2))
        out, _ = self.decoder(self.embedding(tgt), h)
        pred = self.output(out)
        hyp_seq = pred.max(-1)[1]
        return pred, tgt, hyp_seq, tgt


class Trainer():
    def __init__(self):
        logging.info("Trainer is initialized")

    def train(self, model, train_loader, train_sampler, valid_loader_list, opt, loss_type, start_epoch, num_epochs, label2id, id2label, last_metrics=None):
        history = []
        start_time = time.time()
        best_valid_loss = 1000000000 if last_metrics is None else last_metrics['valid_loss']
        smoothing = constant.args.label_smoothing

        logging.info("name " +  constant.args.name)

        for epoch in range(start_epoch, num_epochs):
            sys.stdout.flush()
            total_loss, total_cer, total_wer, total_char, total_word = 0, 0, 0, 0, 0

            start_iter = 0

            logging.info("TRAIN")
            model.train()
            for i, (data) in enumerate(iter(train_loader), start=start_iter):
                src, tgt, src_percentages, src_lengths, tgt_lengths = data

                opt.zero_grad()

                pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)

                strs_gold, strs_hyps = [], []
                for ut_gold in gold_seq:
                    str_gold = ""
                    for x in ut_gold:
                        if int(x) == constant.PAD_TOKEN:
                            break
                        str_gold = str_gold + id2label[int(x)]
                    strs_gold.append(str_gold)
                for ut_hyp in hyp_seq:
                    str_hyp = ""
                    for x in ut_hyp:
                        if int(x) == constant.PAD_TOKEN:
                            break
                        str_hyp = str_hyp + id2label[int(x)]
                    strs_hyps.append(str_hyp)

                seq_length = pred.size(1)
                sizes = Variable(src_percentages.mul_(int(seq_length)).int(), requires_grad=False)

                loss, num_correct = calculate_metrics(
                    pred, gold, input_lengths=sizes, target_lengths=tgt_lengths, smoothing=smoothing, loss_type=loss_type)

                for j in range(len(strs_hyps)):
                    cer = calculate_cer(strs_hyps[j].replace(' ', ''), strs_gold[j].replace(' ', ''))
                    wer = calculate_wer(strs_hyps[j], strs_gold[j])
                    total_cer += cer
                    total_wer += wer
                    total_char += len(strs_gold[j].replace(' ', ''))
                    total_word += len(strs_gold[j].split(" "))

                loss.backward()
                opt.step()

                total_loss += loss.item()
            print("(Epoch {}) TRAIN LOSS:{:.4f} CER:{:.2f}% LR:{:.7f}".format(
                (epoch+1), total_loss/(len(train_loader)), total_cer*100/total_char, opt._rate))

            logging.info("VALID")
            model.eval()

            for ind in range(len(valid_loader_list)):
                valid_loader = valid_loader_list[ind]

                total_valid_loss, total_valid_cer, total_valid_wer, total_valid_char, total_valid_word = 0, 0, 0, 0, 0
                for i, (data) in enumerate(iter(valid_loader)):
                    src, tgt, src_percentages, src_lengths, tgt_lengths = data

                    pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)

                    seq_length = pred.size(1)
                    sizes = Variable(src_percentages.mul_(int(seq_length)).int(), requires_grad=False)

                    loss, num_correct = calculate_metrics(
                        pred, gold, input_lengths=sizes, target_lengths=tgt_lengths, smoothing=smoothing, loss_type=loss_type)

                    strs_gold, strs_hyps = [], []
                    for ut_gold in gold_seq:
                        str_gold = ""
                        for x in ut_gold:
                            if int(x) == constant.PAD_TOKEN:
                                break
                            str_gold = str_gold + id2label[int(x)]
                        strs_gold.append(str_gold)
                    for ut_hyp in hyp_seq:
                        str_hyp = ""
                        for x in ut_hyp:
                            if int(x) == constant.PAD_TOKEN:
                                break
                            str_hyp = str_hyp + id2label[int(x)]
                        strs_hyps.append(str_hyp)

                    for j in range(len(strs_hyps)):
                        cer = calculate_cer(strs_hyps[j].replace(' ', ''), strs_gold[j].replace(' ', ''))
                        wer = calculate_wer(strs_hyps[j], strs_gold[j])
                        total_valid_cer += cer
                        total_valid_wer += wer
                        total_valid_char += len(strs_gold[j].replace(' ', ''))
                        total_valid_word += len(strs_gold[j].split(" "))

                    total_valid_loss += loss.item()
                print("VALID SET {} LOSS:{:.4f} CER:{:.2f}%".format(ind,
                        total_valid_loss/(len(valid_loader)), total_valid_cer*100/total_valid_char))

            metrics = {}
            metrics["train_loss"] = total_loss / len(train_loader)
            metrics["valid_loss"] = total_valid_loss / (len(valid_loader))
            metrics["train_cer"] = total_cer
            metrics["train_wer"] = total_wer
            metrics["valid_cer"] = total_valid_cer
            metrics["valid_wer"] = total_valid_wer
            history.append(metrics)

            if best_valid_loss > total_valid_loss/len(valid_loader):
                best_valid_loss = total_valid_loss/len(valid_loader)


def make_loader(n_batches):
    batches = []
    for _ in range(n_batches):
        src = torch.randn(4, 1, 40, 60)
        tgt = torch.randint(1, 30, (4, 12))
        batches.append((src, tgt, torch.ones(4), torch.full((4,), 60), torch.full((4,), 12)))
    return batches


torch.manual_seed(0)
id2label = {i: chr(ord('a') + i - 1) if i > 0 else '' for i in range(30)}
label2id = {v: k for k, v in id2label.items()}
model = Transformer()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
opt._rate = 1e-3
trainer = Trainer()
trainer.train(model, make_loader(6), None, [make_loader(8)], opt, "ce", 0, 2, label2id, id2label)
