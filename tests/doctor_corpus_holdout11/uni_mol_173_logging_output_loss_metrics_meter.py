# Source: https://github.com/deepmodeling/Uni-Mol/issues/173
#   code: the reporter's loss class, as the issue quotes it (logging_output = {"loss": loss}),
#   run by Uni-Core's Trainer.train_step/_reduce_and_log_stats and its metrics aggregators
#   (unicore/trainer.py, unicore/logging/metrics.py and meters.py at commit ace6fae)
# Adapted: Uni-Core's metrics module reduced to aggregate/log_scalar/get_active_aggregators,
#   MetersDict, AverageMeter and safe_round as they are; the Trainer's train_step reduced to one
#   forward/backward/step per sample on one process (no gradient accumulation, no distributed
#   sync, no fp16) followed by _reduce_and_log_stats; the reporter's loss class written in the
#   shape of Uni-Mol's losses (forward returns loss, sample_size, logging_output; reduce_metrics
#   sums the logged losses) around a small regression network; 3 epochs of 40 random batches of
#   32 samples of 64 features; cpu, seeded.
import bisect
import contextlib
import math
import uuid
from collections import OrderedDict, defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F


def type_as(a, b):
    if torch.is_tensor(a) and torch.is_tensor(b):
        return a.to(b)
    else:
        return a


def safe_round(number, ndigits):
    if hasattr(number, "__round__"):
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
        self.val = None
        self.sum = 0
        self.count = 0

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
    def smoothed_value(self):
        val = self.avg
        if self.round is not None and val is not None:
            val = safe_round(val, self.round)
        return val


class MetersDict(OrderedDict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.priorities = []

    def __setitem__(self, key, value):
        assert key not in self, "MetersDict doesn't support reassignment"
        priority, value = value
        bisect.insort(self.priorities, (priority, len(self.priorities), key))
        super().__setitem__(key, value)
        for _, _, key in self.priorities:
            self.move_to_end(key)

    def add_meter(self, key, meter, priority):
        self.__setitem__(key, (priority, meter))

    def get_smoothed_values(self):
        return OrderedDict([(key, self[key].smoothed_value) for key in self.keys()])

    def reset(self):
        for meter in self.values():
            meter.reset()


_aggregators = OrderedDict()
_active_aggregators = OrderedDict()
_active_aggregators_cnt = defaultdict(lambda: 0)
_aggregators["default"] = MetersDict()
_active_aggregators["default"] = _aggregators["default"]
_active_aggregators_cnt["default"] = 1


@contextlib.contextmanager
def aggregate(name=None):
    if name is None:
        name = str(uuid.uuid4())
        agg = MetersDict()
    else:
        agg = _aggregators.setdefault(name, MetersDict())
    _active_aggregators[name] = agg
    _active_aggregators_cnt[name] += 1
    yield agg
    _active_aggregators_cnt[name] -= 1
    if _active_aggregators_cnt[name] == 0 and name in _active_aggregators:
        del _active_aggregators[name]


def get_active_aggregators():
    return list(_active_aggregators.values())


def log_scalar(key, value, weight=1, priority=10, round=None):
    for agg in get_active_aggregators():
        if key not in agg:
            agg.add_meter(key, AverageMeter(round=round), priority)
        agg[key].update(value, weight)


class MyMSELoss(object):
    def forward(self, model, sample, reduce=True):
        pred = model(sample["net_input"])
        loss = F.mse_loss(pred, sample["target"], reduction="sum")
        sample_size = sample["target"].size(0)
        logging_output = {
            "loss": loss,
            "sample_size": sample_size,
            "bsz": sample_size,
        }
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs, split="valid"):
        loss_sum = sum(log.get("loss", 0) for log in logging_outputs)
        sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
        log_scalar("loss", loss_sum / sample_size / math.log(2), sample_size, round=3)


class Trainer(object):
    def __init__(self, model, loss):
        self.model = model
        self.loss = loss
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(self, samples):
        with aggregate("train"):
            self.model.train()
            logging_outputs, sample_size = [], 0
            for sample in samples:
                loss, sample_size_i, logging_output = self.loss.forward(self.model, sample)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                logging_outputs.append(logging_output)
                sample_size += sample_size_i
            return self._reduce_and_log_stats(logging_outputs, sample_size)

    def _reduce_and_log_stats(self, logging_outputs, sample_size):
        with aggregate() as agg:
            if logging_outputs is not None:
                self.loss.reduce_metrics(logging_outputs)
                del logging_outputs
            logging_output = agg.get_smoothed_values()
            logging_output["sample_size"] = sample_size
            return logging_output


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
trainer = Trainer(model, MyMSELoss())
epoch_itr = [{"net_input": torch.randn(32, 64), "target": torch.randn(32, 1)} for _ in range(40)]

for epoch in range(3):
    for i, sample in enumerate(epoch_itr):
        log_output = trainer.train_step([sample])
    print(epoch, log_output)
