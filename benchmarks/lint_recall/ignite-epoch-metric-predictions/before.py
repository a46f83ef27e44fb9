# Source: https://github.com/pytorch/ignite/blob/19afc2430339a26119f0790650b00d333b50fe39/ignite/metrics/epoch_metric.py
# Adapted excerpt, before the fix https://github.com/pytorch/ignite/commit/568a91117307f132d30cf1192f65a25890d49c94
# (trimmed to the code the fix touches; omitted lines are marked).
import warnings
from typing import Callable, Sequence

import torch

from ignite.metrics.metric import Metric
# ... (lines 7-10 omitted)
class EpochMetric(Metric):
    ...  # (lines 12-47 omitted)
    def reset(self) -> None:
        self._predictions = []
        self._prediction_tensor = None
        self._targets = []
        self._target_tensor = None

    def update(self, output: Sequence[torch.Tensor]) -> None:
        y_pred, y = output

        if y_pred.ndimension() not in (1, 2):
            raise ValueError("Predictions should be of shape (batch_size, n_classes) or (batch_size, ).")

        if y.ndimension() not in (1, 2):
            raise ValueError("Targets should be of shape (batch_size, n_classes) or (batch_size, ).")

        if y.ndimension() == 2:
            if not torch.equal(y ** 2, y):
                raise ValueError("Targets should be binary (0 or 1).")

        if y_pred.ndimension() == 2 and y_pred.shape[1] == 1:
            y_pred = y_pred.squeeze(dim=-1)

        if y.ndimension() == 2 and y.shape[1] == 1:
            y = y.squeeze(dim=-1)

        self._predictions.append(y_pred.to(dtype=torch.float32, device="cpu"))
        self._targets.append(y.to(dtype=torch.long, device="cpu"))

        # Check once the signature and execution of compute_fn
        if len(self._predictions) == 1:
            try:
                self.compute_fn(self._predictions[0], self._targets[0])
            except Exception as e:
                warnings.warn("Probably, there can be a problem with `compute_fn`:\n {}.".format(e), EpochMetricWarning)
