# Source: https://github.com/pytorchbearer/torchbearer/blob/a726222bf255bada431f542a49eed423c0746d80/torchbearer/metrics/primitives.py
# Adapted excerpt, before the fix https://github.com/pytorchbearer/torchbearer/commit/bd39387dea71de16dceb5d063ae83eec05fc6072
# (trimmed to the code the fix touches; omitted lines are marked).
import torchbearer
from torchbearer import Metric
from .decorators import default_for_key, running_mean, mean, std, to_dict

import torch
# ... (lines 14-119 omitted)
@default_for_key('mse')
@running_mean
@mean
class MeanSquaredError(Metric):
    """Mean squared error metric. Computes the pixelwise squared error which is then averaged with decorators.
    Decorated with a mean and running_mean. Default for key: 'mse'.

    Args:
        pred_key (:class:`torchbearer.StateKey`): The key in state which holds the predicted values
        target_key (:class:`torchbearer.StateKey`): The key in state which holds the target values
    """

    def __init__(self, pred_key=torchbearer.Y_PRED, target_key=torchbearer.Y_TRUE):
        super(MeanSquaredError, self).__init__('mse')
        self.pred_key = pred_key
        self.target_key = target_key

    def process(self, *args):
        state = args[0]
        y_pred = state[self.pred_key]
        y_true = state[self.target_key]
        return torch.pow(y_pred - y_true.view_as(y_pred), 2)
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
