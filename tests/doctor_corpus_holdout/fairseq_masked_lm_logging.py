# Source: https://github.com/facebookresearch/fairseq/issues/2255
#   code: fairseq/criterions/masked_lm.py, fairseq/logging/meters.py (AverageMeter, type_as,
#   safe_round) and fairseq/logging/metrics.py (aggregate, log_scalar, reset_meters) at the
#   commit before 8eb9123
# Adapted: the registries, the TPU branch, MetersDict priorities, log_derived and state
#   dicts dropped; the RoBERTa model replaced by a one-layer transformer encoder with an LM
#   head over the masked positions; the train loop reduced to fairseq's structure (aggregate
#   "train" around the epoch, "train_inner" reset every log_interval updates); random token
#   batches with 15% of positions as targets; cuda -> cpu; 2 epochs of 40 updates.
import contextlib
import math
import uuid
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


def type_as(a, b):
    if torch.is_tensor(a) and torch.is_tensor(b):
        return a.to(b)
    else:
        return a


def safe_round(number, ndigits):
    if hasattr(number, '__round__'):
        return round(number, ndigits)
    elif torch is not None and torch.is_tensor(number) and number.numel() == 1:
        return safe_round(number.item(), ndigits)
    else:
        return number


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self, round=None):
        self.round = round
        self.reset()

    def reset(self):
        self.val = None  # most recent update
        self.sum = 0  # sum from all updates
        self.count = 0  # total n from all updates

    def update(self, val, n=1):
        if val is not None:
            self.val = val
            if n > 0:
                self.sum = type_as(self.sum, val) + (val * n)
                self.count = type_as(self.count, n) + n

    @property
    def avg(self):
        return self.sum / self.count if self.count > 0 else self.val

    @property
    def smoothed_value(self) -> float:
        val = self.avg
        if self.round is not None and val is not None:
            val = safe_round(val, self.round)
        return val


class MetersDict(OrderedDict):
    def add_meter(self, key, meter, priority):
        self[key] = meter

    def get_smoothed_values(self):
        return OrderedDict((key, meter.smoothed_value) for key, meter in self.items())

    def reset(self):
        for meter in self.values():
            meter.reset()


_aggregators = OrderedDict()
_active_aggregators = OrderedDict()
_aggregators["default"] = MetersDict()
_active_aggregators["default"] = _aggregators["default"]


@contextlib.contextmanager
def aggregate(name=None, new_root=False):
    if name is None:
        name = str(uuid.uuid4())
        assert name not in _aggregators
        agg = MetersDict()
    else:
        assert name != "default"
        agg = _aggregators.setdefault(name, MetersDict())

    if new_root:
        backup_aggregators = _active_aggregators.copy()
        _active_aggregators.clear()

    _active_aggregators[name] = agg
    yield agg
    del _active_aggregators[name]

    if new_root:
        _active_aggregators.clear()
        _active_aggregators.update(backup_aggregators)


def get_active_aggregators():
    return list(_active_aggregators.values())


def log_scalar(key, value, weight=1, priority=10, round=None):
    for agg in get_active_aggregators():
        if key not in agg:
            agg.add_meter(key, AverageMeter(round=round), priority)
        agg[key].update(value, weight)


def reset_meters(name):
    meters = _aggregators.get(name, None)
    if meters is not None:
        meters.reset()


def get_smoothed_values(name):
    return _aggregators[name].get_smoothed_values()


class MaskedLmLoss(nn.Module):
    """
    Implementation for the loss used in masked language model (MLM) training.
    """

    def __init__(self, padding_idx):
        super().__init__()
        self.padding_idx = padding_idx

    def forward(self, model, sample, reduce=True):
        masked_tokens = sample['target'].ne(self.padding_idx)
        sample_size = masked_tokens.int().sum()

        if masked_tokens.device == torch.device('cpu'):
            if not masked_tokens.any():
                masked_tokens = None

        logits = model(**sample['net_input'], masked_tokens=masked_tokens)[0]
        targets = sample['target']
        if masked_tokens is not None:
            targets = targets[masked_tokens]

        loss = F.cross_entropy(
            logits.view(-1, logits.size(-1)),
            targets.view(-1),
            reduction='sum',
            ignore_index=self.padding_idx,
        )

        logging_output = {
            'loss': loss,
            'ntokens': sample['ntokens'],
            'nsentences': sample['nsentences'],
            'sample_size': sample_size,
        }
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        """Aggregate logging outputs from data parallel training."""
        loss_sum = sum(log.get('loss', 0) for log in logging_outputs)
        sample_size = sum(log.get('sample_size', 0) for log in logging_outputs)

        log_scalar('loss', loss_sum / sample_size / math.log(2), sample_size, round=3)


class TinyRoberta(nn.Module):
    def __init__(self, vocab=1000, dim=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=1)
        self.layer = nn.TransformerEncoderLayer(dim, 4, 256, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, src_tokens, masked_tokens=None):
        x = self.layer(self.embed(src_tokens))
        if masked_tokens is not None:
            x = x[masked_tokens, :]
        return (self.lm_head(x),)


def make_sample(bsz=16, tsz=64, vocab=1000, pad=1):
    tokens = torch.randint(4, vocab, (bsz, tsz))
    target = torch.full_like(tokens, pad)
    mask = torch.rand(bsz, tsz) < 0.15
    target[mask] = tokens[mask]
    tokens[mask] = 3
    return {'net_input': {'src_tokens': tokens}, 'target': target,
            'ntokens': bsz * tsz, 'nsentences': bsz}


def train(model, criterion, optimizer, epoch, num_updates=40, log_interval=10):
    with aggregate("train"):
        for i in range(num_updates):
            with aggregate("train_inner"):
                sample = make_sample()
                optimizer.zero_grad()
                loss, sample_size, logging_output = criterion(model, sample)
                loss.backward()
                optimizer.step()
                criterion.reduce_metrics([logging_output])

            if (i + 1) % log_interval == 0:
                stats = get_smoothed_values("train_inner")
                print('epoch {:03d} | update {:03d} | loss {}'.format(epoch, i + 1, stats['loss']))
                reset_meters("train_inner")
    stats = get_smoothed_values("train")
    print('epoch {:03d} | train loss {}'.format(epoch, stats['loss']))
    reset_meters("train")


if __name__ == '__main__':
    torch.manual_seed(1)
    model = TinyRoberta()
    criterion = MaskedLmLoss(padding_idx=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for epoch in range(1, 3):
        train(model, criterion, optimizer, epoch)
