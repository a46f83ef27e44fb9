# Source: https://github.com/pytorchbearer/torchbearer/blob/58f064e14cb2a2898715f030cef97f3ddfd66dc6/torchbearer/trial.py
# Adapted excerpt, after the fix https://github.com/pytorchbearer/torchbearer/commit/58f064e14cb2a2898715f030cef97f3ddfd66dc6
# (trimmed to the code the fix touches; omitted lines are marked).
import itertools
# ... (lines 18-18 omitted)
import torch
# ... (lines 20-22 omitted)
import torchbearer
# ... (lines 24-348 omitted)
class Trial(object):
    ...  # (lines 350-750 omitted)
    @inject_sampler(torchbearer.TRAIN_DATA)
    def _fit_pass(self, state):
        state.update(self.state)  # TODO: Hack to make injection work, should be removed if `self.state` is mutable
        self.train()

        state[torchbearer.ITERATOR] = Trial._new_iter(state[torchbearer.GENERATOR])

        state[torchbearer.METRIC_LIST].reset(state)
        state[torchbearer.METRICS] = {}

        state[torchbearer.CALLBACK_LIST].on_start_training(state)
        for state[torchbearer.BATCH] in (range(state[torchbearer.STEPS]) if state[torchbearer.STEPS] != -1 else itertools.count()):
            state[torchbearer.SAMPLER].sample(state)
            state[torchbearer.CALLBACK_LIST].on_sample(state)

            # Update parameters
            state[torchbearer.OPTIMIZER].step(lambda: self.closure(state))

            state[torchbearer.METRICS] = state[torchbearer.METRIC_LIST].process(state.data)
            state[torchbearer.CALLBACK_LIST].on_step_training(state)

            if state[torchbearer.STOP_TRAINING]:
                break

        state[torchbearer.METRICS].update(state[torchbearer.METRIC_LIST].process_final(state.data))

        state[torchbearer.CALLBACK_LIST].on_end_training(state)
        return state
# --- from torchbearer/metrics/primitives.py (same commit) ---
@default_for_key('loss')
@running_mean
@mean
class Loss(Metric):
    ...  # (lines 150-159 omitted)
    def process(self, *args):
        state = args[0]
        return state[torchbearer.LOSS]
# --- from torchbearer/metrics/aggregators.py (same commit) ---
class Mean(Metric):
    ...  # (lines 194-201 omitted)
    def __init__(self, name, dim=None):
        super(Mean, self).__init__(name)
        self._kwargs = {'dim': dim} if dim is not None else {}
        self._sum = 0.0
        self._count = 0

    def process(self, *args):
        """Add the input to the rolling sum. Input must be a torch tensor.

        Args:
            args:  The output of some previous call to :meth:`.Metric.process`.
        """
        data = args[0]
        tot = data.sum(**self._kwargs)
        self._sum += tot
        self._count += data.numel() / tot.numel()
