# Source: https://github.com/pfnet/pytorch-pfn-extras/pull/49
#   code: pytorch_pfn_extras/reporting.py (Reporter, report, Summary, DictSummary) and the
#   LogReport extension's summary at the commit before the fix (39fd071^)
# Adapted: docstrings and the methods not used here dropped; LogReport reduced to its
#   DictSummary, added to every iteration and reported and reset every 50 iterations (its
#   trigger); the training loop (an MLP regressor reporting its loss through the current
#   reporter, as in the reporting docstring) and random data added; cuda -> cpu; 120
#   iterations.
import collections
import contextlib
import threading

import numpy
import torch
import torch.nn as nn
import torch.nn.functional as F

_thread_local = threading.local()


def _copy_variable(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    return value


class Reporter:

    def __init__(self):
        self._observer_names = {}
        self.observation = {}

    def __enter__(self):
        """Makes this reporter object current."""
        _get_reporters().append(self)

    def __exit__(self, exc_type, exc_value, traceback):
        """Recovers the previous reporter object to the current."""
        _get_reporters().pop()

    @contextlib.contextmanager
    def scope(self, observation):
        old = self.observation
        self.observation = observation
        self.__enter__()
        try:
            yield
        finally:
            self.__exit__(None, None, None)
            self.observation = old

    def add_observer(self, name, observer):
        self._observer_names[id(observer)] = name

    def report(self, values, observer=None):
        values = {k: _copy_variable(v) for k, v in values.items()}
        if observer is not None:
            observer_id = id(observer)
            if observer_id not in self._observer_names:
                raise KeyError(
                    'Given observer is not registered to the reporter.')
            observer_name = self._observer_names[observer_id]
            for key, value in values.items():
                name = '%s/%s' % (observer_name, key)
                self.observation[name] = value
        else:
            self.observation.update(values)


def _get_reporters():
    try:
        reporters = _thread_local.reporters
    except AttributeError:
        reporters = _thread_local.reporters = []
    return reporters


def report(values, observer=None):
    reporters = _get_reporters()
    if reporters:
        current = reporters[-1]
        current.report(values, observer)


class Summary:

    def __init__(self):
        self._x = 0.0
        self._x2 = 0.0
        self._n = 0

    def add(self, value, weight=1):
        self._x += weight * value
        self._x2 += weight * value * value
        self._n += weight

    def compute_mean(self):
        """Computes the mean."""
        x, n = self._x, self._n
        return x / n


class DictSummary:

    def __init__(self):
        self._summaries = collections.defaultdict(Summary)

    def add(self, d):
        summaries = self._summaries
        for k, v in d.items():
            w = 1
            if isinstance(v, tuple):
                w = v[1]
                v = v[0]
                if not numpy.isscalar(w) and not getattr(w, 'ndim', -1) == 0:
                    raise ValueError(
                        'Given weight to {} was not scalar.'.format(k))
            if numpy.isscalar(v) or getattr(v, 'ndim', -1) == 0:
                summaries[k].add(v, weight=w)

    def compute_mean(self):
        return {name: summary.compute_mean()
                for name, summary in self._summaries.items()}


class MyRegressor(nn.Module):

    def __init__(self, predictor):
        super().__init__()
        self.predictor = predictor

    def forward(self, x, y):
        pred = self.predictor(x)
        abs_error = torch.sum(abs(pred - y)) / len(x)
        loss = F.mse_loss(pred, y)
        report({
            'abs_error': abs_error,
            'squared_error': loss,
        }, self)
        return loss


def main():
    torch.manual_seed(0)
    model = MyRegressor(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    reporter = Reporter()
    reporter.add_observer('main', model)
    summary = DictSummary()
    for iteration in range(1, 121):
        x, y = torch.randn(128, 64), torch.randn(128, 1)
        observation = {}
        with reporter.scope(observation):
            optimizer.zero_grad()
            loss = model(x, y)
            loss.backward()
            optimizer.step()
        summary.add(observation)
        if iteration % 50 == 0:
            stats = summary.compute_mean()
            print(iteration, {k: v.item() for k, v in stats.items()})
            summary = DictSummary()


if __name__ == '__main__':
    main()
