# Source: https://github.com/Lightning-AI/torchmetrics/issues/1949
#   code: src/torchmetrics/metric.py (Metric.__init__'s wrapping of update and compute,
#   add_state, forward, _forward_full_state_update, _wrap_update, _wrap_compute, reset) at
#   ab74258, the release the issue was reported against
# Adapted: the one-shot usage (metric = Metric(); result = metric(target=target,
#   preds=preds)) run for 24 evaluations of different prediction sets, each with a new
#   BinaryAUROC and no reset; torchmetrics is not installed, so Metric keeps the methods the
#   usage runs, reduced to the single-process path (no sync, no compute_on_cpu, add_state
#   without reductions), and BinaryAUROC (thresholds=None) keeps its list states of preds and
#   targets and computes the AUROC from the concatenated states by ranking; 200000
#   predictions per evaluation, cpu, seeded.
import functools

import torch
from torch import Tensor, nn


class Metric(nn.Module):
    full_state_update = None

    def __init__(self):
        super().__init__()
        self._update_count = 0
        self._forward_cache = None
        self._computed = None
        self._enable_grad = False
        self._defaults = {}
        self.update = self._wrap_update(self.update)
        self.compute = self._wrap_compute(self.compute)

    def add_state(self, name, default):
        if not isinstance(default, (Tensor, list)) or (isinstance(default, list) and default):
            raise ValueError("state variable must be a tensor or any empty list (where you can append tensors)")
        setattr(self, name, default)
        self._defaults[name] = default

    def forward(self, *args, **kwargs):
        self._forward_cache = self._forward_full_state_update(*args, **kwargs)
        return self._forward_cache

    def _forward_full_state_update(self, *args, **kwargs):
        self.update(*args, **kwargs)
        _update_count = self._update_count
        cache = {attr: getattr(self, attr) for attr in self._defaults}
        self._enable_grad = True
        self.reset()
        self.update(*args, **kwargs)
        batch_val = self.compute()
        for attr, val in cache.items():
            setattr(self, attr, val)
        self._update_count = _update_count
        self._computed = None
        self._enable_grad = False
        return batch_val

    def _wrap_update(self, update):
        @functools.wraps(update)
        def wrapped_func(*args, **kwargs):
            self._computed = None
            self._update_count += 1
            with torch.set_grad_enabled(self._enable_grad):
                update(*args, **kwargs)
        return wrapped_func

    def _wrap_compute(self, compute):
        @functools.wraps(compute)
        def wrapped_func(*args, **kwargs):
            if self._computed is not None:
                return self._computed
            value = compute(*args, **kwargs)
            self._computed = value
            return value
        return wrapped_func

    def reset(self):
        self._update_count = 0
        self._forward_cache = None
        self._computed = None
        for attr, default in self._defaults.items():
            if isinstance(default, Tensor):
                setattr(self, attr, default.detach().clone())
            else:
                setattr(self, attr, [])


class BinaryAUROC(Metric):
    def __init__(self):
        super().__init__()
        self.add_state("preds", default=[])
        self.add_state("target", default=[])

    def update(self, preds, target):
        self.preds.append(preds)
        self.target.append(target)

    def compute(self):
        preds, target = torch.cat(self.preds), torch.cat(self.target)
        ranks = torch.empty_like(preds)
        ranks[preds.argsort()] = torch.arange(1, len(preds) + 1, dtype=preds.dtype)
        n_pos = target.sum()
        n_neg = len(target) - n_pos
        return (ranks[target == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


torch.manual_seed(0)
results = []
for evaluation in range(24):
    target = torch.randint(0, 2, (200000,))
    preds = torch.sigmoid(torch.randn(200000) + target * (evaluation / 24))
    metric = BinaryAUROC()
    result = metric(target=target, preds=preds)
    results.append(result.item())
print(results[0], results[-1])
