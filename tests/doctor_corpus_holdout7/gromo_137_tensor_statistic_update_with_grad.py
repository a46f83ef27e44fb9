# Source: https://github.com/growingnet/gromo/issues/137
#   code: src/gromo/utils/tensor_statistic.py (TensorStatistic) and the forward of
#   MergeGrowingModule and compute_s_update of LinearMergeGrowingModule
#   (src/gromo/modules/growing_module.py, linear_growing_module.py) at commit 618376a1^1
#   (before the fix adds @torch.no_grad() to TensorStatistic.update and detaches the activity)
# Adapted: TensorStatistic copied without its docstrings; the merge module reduced to the
#   parts the example exercises (forward storing its activity and flagging tensor_s,
#   compute_s_update, the tensor_s statistic), written as LinearMergeGrowingModule over the
#   output of an nn.Linear; the convolutional modules replaced by linear ones, its
#   2000 random 3x32x32 images by 640 random 256-dim samples in batches of 64, 2 epochs; the
#   statistic is updated after each training step as in the example's "Update computation"
#   loop; the cuda memory report replaced by a print; cpu, seeded.
from typing import Any, Callable

import numpy as np
import torch
import torch.nn as nn


def global_device():
    return torch.device("cpu")


class TensorStatistic:

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
        assert shape is None or all(
            i >= 0 and isinstance(i, (int, np.int64)) for i in shape
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

    def init(self):
        if self._shape is None:
            self._tensor = None
        else:
            self._tensor = torch.zeros(self._shape, device=self.device)
        self.samples = 0

    def reset(self):
        self._tensor = None
        self.samples = 0

    def __call__(self):
        if self.samples == 0:
            raise ValueError("The tensor statistic has not been computed.")
        else:
            assert (
                self._tensor is not None
            ), f"If the number of samples is not zero the tensor should not be None."
            return self._tensor / self.samples


class LinearMergeGrowingModule(nn.Module):
    def __init__(self, in_features, post_merge_function=None, name=None):
        super().__init__()
        self.in_features = in_features
        self.post_merge_function = post_merge_function
        self.name = name
        self.use_bias = True
        self.device = global_device()
        self.store_input = 0
        self.store_activity = 0
        self.activity = None
        self.tensor_s = TensorStatistic(
            (in_features + self.use_bias, in_features + self.use_bias),
            update_function=self.compute_s_update,
            name=f"S({name})",
        )
        self.previous_tensor_s = None
        self.previous_tensor_m = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for t in (self.tensor_s, self.previous_tensor_s, self.previous_tensor_m):
            if t:
                t.updated = False

        if self.store_input > 0:
            self.input = x
            self.input.retain_grad()

        if self.post_merge_function and (x is not None):
            y = self.post_merge_function(x)
        else:
            y = x

        if self.store_activity > 0:
            self.activity = y
            self.tensor_s.updated = False

        return y

    def compute_s_update(self):
        assert (
            self.store_activity
        ), f"The input must be stored to compute the update of S. (error in {self.name})"
        assert (
            self.activity is not None
        ), f"The input must be stored to compute the update of S. (error in {self.name})"
        if self.use_bias:
            input_extended = torch.cat(
                (
                    self.activity,
                    torch.ones(self.activity.shape[0], 1, device=self.device),
                ),
                dim=1,
            )
            return (
                torch.einsum("ij,ik->jk", input_extended, input_extended),
                self.activity.shape[0],
            )
        else:
            return (
                torch.einsum("ij,ik->jk", self.activity, self.activity),
                self.activity.shape[0],
            )


torch.manual_seed(0)
in_features, hidden, out_features = 256, 256, 10
X_train = torch.rand(640, in_features)
Y_train = torch.rand(640, out_features).argmax(dim=1)
train_dataset = torch.utils.data.TensorDataset(X_train, Y_train)
train_dataloader = torch.utils.data.DataLoader(train_dataset, batch_size=64)

test_linear_in = nn.Linear(in_features, hidden)
test_merge = LinearMergeGrowingModule(hidden, post_merge_function=nn.ReLU(), name="merge")
test_linear_out = nn.Linear(hidden, out_features)
model = nn.Sequential(test_linear_in, test_merge, test_linear_out)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()

test_merge.store_activity = True
test_merge.tensor_s.init()
for epoch in range(2):
    for x, y in train_dataloader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        test_merge.tensor_s.update()
    print(epoch, loss.item(), test_merge.tensor_s.samples)
