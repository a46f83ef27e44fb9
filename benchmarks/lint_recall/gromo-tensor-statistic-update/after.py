# Source: https://github.com/growingnet/gromo/blob/361063d3241eea7324dc5c7ee9cfd2b6a9d69a97/src/gromo/utils/tensor_statistic.py
# Adapted excerpt, after the fix https://github.com/growingnet/gromo/commit/361063d3241eea7324dc5c7ee9cfd2b6a9d69a97
# (trimmed to the code the fix touches; omitted lines are marked).
from typing import Any, Callable

import numpy as np
import torch

from gromo.utils.utils import global_device
# ... (lines 7-8 omitted)
class TensorStatistic:
    ...  # (lines 10-38 omitted)
    def __init__(
        self,
        shape: tuple[int, ...] | None,
        update_function: (
            Callable[[Any], tuple[torch.Tensor, int]]
            | Callable[[], tuple[torch.Tensor, int]]
        ),
        device: torch.device | str | None = None,
        name: str | None = None,
    ) -> None:
        ...  # (lines 49-60 omitted)
        assert shape is None or all(
            i >= 0 and isinstance(i, (int, np.int64)) for i in shape  # type: ignore
        ), f"The shape must be a tuple of positive integers. {type(shape)}, {shape}"
        self._shape = shape
        self._update_function = update_function
        self.name = name if name is not None else "TensorStatistic"
        self._tensor: torch.Tensor | None = None
        self.samples = 0
        self.updated = True
        self.device = device if device else global_device()

    def __str__(self):
        return f"{self.name} tensor of shape {self._shape} with {self.samples} samples"

    def update(self, **kwargs):
        assert (
            not self._shape or self._tensor is not None
        ), f"The tensor statistic {self.name} has not been initialized."
        if self.updated is False:
            with torch.no_grad():
                update, nb_sample = self._update_function(**kwargs)
                if self._tensor is not None:
                    assert update.size() == self._tensor.size(), (
                        f"The update tensor has a different size than the tensor statistic {self.name}"
                        f" {update.size()=}, {self._tensor.size()=}"
                    )
                    self._tensor += update
                else:
                    assert (
                        self._shape is None
                    ), "If self._shape is not None, self_.tensor should be initialised in init"
                    self._tensor = update
            self.samples += nb_sample
            self.updated = True
