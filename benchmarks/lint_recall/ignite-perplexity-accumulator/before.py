# Source: https://github.com/pytorch/ignite/blob/fa394ca81fa219c7f4e2a04675fca14715545388/ignite/metrics/nlp/perplexity.py
# Adapted excerpt, before the fix https://github.com/pytorch/ignite/commit/e1e1e5fb807beab3ebc9a88943a5b3dc41726863
# (trimmed to the code the fix touches; omitted lines are marked).
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ignite.exceptions import NotComputableError
from ignite.metrics.metric import Metric, reinit__is_reduced, sync_all_reduce
# ... (lines 8-11 omitted)
class Perplexity(Metric):
    ...  # (lines 13-71 omitted)
    def __init__(
        self,
        output_transform: Callable = lambda x: x,
        device: str | torch.device = torch.device("cpu"),
    ):
        super().__init__(output_transform=output_transform, device=device)

    @reinit__is_reduced
    def reset(self) -> None:
        self._sum_of_nll = torch.tensor(0.0, dtype=torch.double, device=self._device)
        self._num_tokens = torch.tensor(0, dtype=torch.long, device=self._device)

    @reinit__is_reduced
    def update(self, output: tuple[torch.Tensor, torch.Tensor]) -> None:
        y_pred, y = output

        if y_pred.ndim < 2:
            raise ValueError(f"y_pred must be at least 2-dimensional (got shape: {y_pred.shape})")

        if y.ndim < 1:
            raise ValueError(f"y must be at least 1-dimensional (got shape: {y.shape})")

        nll = F.cross_entropy(y_pred, y, reduction="sum")
        self._sum_of_nll += nll.to(self._device, dtype=torch.double)
        self._num_tokens += y.numel()
