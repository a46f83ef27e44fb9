# Source: https://github.com/pytorchbearer/torchbearer/issues/506
#   code: torchbearer/metrics/primitives.py, aggregators.py and trial.py (Trial._fit_pass) at the parent of 89c2724b
# Adapted: the decorator-built MetricTree for the 'mse' metric (MeanSquaredError feeding a Mean and a
# RunningMean) is written out by hand, state keys are plain strings, callbacks and samplers are left
# out; a small autoencoder on random data, 2 epochs of 150 steps on CPU.
from collections import deque

import torch
import torch.nn as nn


class Metric(object):
    def __init__(self, name):
        self.name = name

    def process(self, *args):
        pass

    def process_final(self, *args):
        pass

    def reset(self, state):
        pass


class MeanSquaredError(Metric):
    def __init__(self, pred_key='y_pred', target_key='y_true'):
        super(MeanSquaredError, self).__init__('mse')
        self.pred_key = pred_key
        self.target_key = target_key

    def process(self, *args):
        state = args[0]
        y_pred = state[self.pred_key]
        y_true = state[self.target_key]
        return torch.pow(y_pred - y_true.view_as(y_pred), 2)


class Mean(Metric):
    def __init__(self, name, dim=None):
        super(Mean, self).__init__(name)
        self._kwargs = {'dim': dim} if dim is not None else {}
        self._sum = 0.0
        self._count = 0

    def process(self, *args):
        data = args[0]
        tot = data.sum(**self._kwargs)
        self._sum += tot
        self._count += data.numel() / tot.numel()

    def process_final(self, *args):
        res = self._sum / self._count
        return res.item() if res.numel() <= 1 else res.tolist()

    def reset(self, state):
        self._sum = 0.0
        self._count = 0


class RunningMean(Metric):
    def __init__(self, name, batch_size=50, step_size=10):
        super(RunningMean, self).__init__(name)
        self._batch_size = batch_size
        self._step_size = step_size
        self._cache = deque()
        self._result = {}
        self._i = 0

    def process(self, *args):
        self._cache.append(args[0].mean())
        if len(self._cache) > self._batch_size:
            self._cache.popleft()
        if self._i % self._step_size == 0:
            res = sum(list(self._cache)) / float(len(self._cache))
            self._result = res.item()
        self._i += 1
        return self._result

    def reset(self, state):
        self._i = 0


class MetricTree(Metric):
    def __init__(self, root, children):
        super(MetricTree, self).__init__(root.name)
        self.root, self.children = root, children

    def process(self, *args):
        out = self.root.process(*args)
        results = {}
        for child in self.children:
            value = child.process(out)
            if value is not None:
                results['running_' + child.name] = value
        return results

    def process_final(self, *args):
        return {child.name: child.process_final() for child in self.children if isinstance(child, Mean)}

    def reset(self, state):
        for child in self.children:
            child.reset(state)


class Trial(object):
    def __init__(self, model, optimizer, criterion, metrics):
        self.state = {'model': model, 'optimizer': optimizer, 'criterion': criterion, 'metric_list': metrics}

    def _fit_pass(self, state, generator, steps):
        state['model'].train()
        state['iterator'] = iter(generator)
        state['metric_list'].reset(state)
        state['metrics'] = {}
        for state['batch'] in range(steps):
            state['x'], state['y_true'] = next(state['iterator'])

            def closure():
                state['optimizer'].zero_grad()
                state['y_pred'] = state['model'](state['x'])
                state['loss'] = state['criterion'](state['y_pred'], state['y_true'])
                state['loss'].backward()

            state['optimizer'].step(closure)
            state['metrics'] = state['metric_list'].process(state)
        state['metrics'].update(state['metric_list'].process_final(state))
        return state

    def run(self, generator, steps, epochs=1):
        for epoch in range(epochs):
            state = self._fit_pass(dict(self.state), generator, steps)
            print('epoch', epoch, state['metrics'])


model = nn.Sequential(nn.Linear(1024, 256), nn.ReLU(), nn.Linear(256, 1024))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
mse = MetricTree(MeanSquaredError(), [Mean('mse'), RunningMean('mse')])
images = [torch.rand(64, 1024) for _ in range(150)]
generator = [(x, x) for x in images]
trial = Trial(model, optimizer, nn.MSELoss(), mse)
trial.run(generator, steps=150, epochs=2)
