# Source: https://github.com/ray-project/ray/issues/30629
#   code: convert_pandas_to_torch_tensor (tensorize with the try/except TypeError fallback on
#   torch.as_tensor, get_tensor_for_columns) of python/ray/air/_internal/torch_utils.py as it
#   was before the pull request that answers the issue (ray-project/ray#30738), and the
#   issue's training loop over the dataset pipeline's pandas batches
# Adapted: tensorize and get_tensor_for_columns kept as they were; pandas (not installed)
#   replaced by a minimal DataFrame stand-in (columns, __getitem__ on a column list, .values);
#   Ray Datasets' pipeline by a generator of 40 batches of 64 rows whose "image" column holds
#   one 3x16x16 float array per row (object dtype, the tensor-extension case that makes
#   torch.as_tensor raise TypeError) and a float "label" column; a small classifier trained on
#   them; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn


class DataFrame:
    def __init__(self, columns):
        self._columns = columns
        self.columns = list(columns)

    def __getitem__(self, key):
        if isinstance(key, list):
            return DataFrame({k: self._columns[k] for k in key})
        return Column(self._columns[key])


class Column:
    def __init__(self, values):
        self.values = values


def convert_pandas_to_torch_tensor(data_batch, columns=None, column_dtypes=None, unsqueeze=True):
    columns = columns if columns else []

    def tensorize(vals, dtype):
        """This recursive function allows to convert pyarrow List dtypes
        to multi-dimensional tensors."""
        try:
            return torch.as_tensor(vals, dtype=dtype)
        except TypeError:
            # This exception will be raised if vals is of object dtype
            # or otherwise cannot be made into a tensor directly.
            # We assume it's a sequence in that case.
            # This is more robust than checking for dtype.
            return torch.stack([tensorize(x, dtype) for x in vals])

    def get_tensor_for_columns(columns, dtype):
        feature_tensors = []

        if columns:
            batch = data_batch[columns]
        else:
            batch = data_batch

        for col in batch.columns:
            col_vals = batch[col].values
            t = tensorize(col_vals, dtype=dtype)
            if unsqueeze:
                t = t.unsqueeze(1)
            feature_tensors.append(t)

        if len(feature_tensors) > 1:
            feature_tensor = torch.cat(feature_tensors, dim=1)
        else:
            feature_tensor = feature_tensors[0]
        return feature_tensor

    return get_tensor_for_columns(columns=columns, dtype=column_dtypes)


def iter_batches(n_batches, rng):
    for _ in range(n_batches):
        images = np.empty(64, dtype=object)
        images[:] = [rng.standard_normal((3, 16, 16)).astype(np.float32) for _ in range(64)]
        labels = rng.integers(0, 10, 64).astype(np.float32)
        yield DataFrame({"image": images, "label": labels})


rng = np.random.default_rng(0)
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(16, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = nn.CrossEntropyLoss()

for step, batch in enumerate(iter_batches(40, rng)):
    inputs = convert_pandas_to_torch_tensor(batch, columns=["image"], column_dtypes=torch.float32,
                                            unsqueeze=False)
    labels = convert_pandas_to_torch_tensor(batch, columns=["label"], unsqueeze=False).long()
    loss = loss_fn(model(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(step, inputs.shape, round(loss.item(), 4))
