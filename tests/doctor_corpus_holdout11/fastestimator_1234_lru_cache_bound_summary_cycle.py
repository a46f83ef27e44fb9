# Source: https://github.com/fastestimator/fastestimator/pull/1234
#   code: fastestimator/dataset/dataset.py (InMemoryDataset: __init__, _skip_init, _do_split,
#   split by fraction) and fastestimator/dataset/numpy_dataset.py (NumpyDataset) at 91c53d27^,
#   before the pull request
# Adapted: InMemoryDataset and NumpyDataset kept as they were for the calls used here (the
#   @traceable decorators, stratified and index splits dropped; summary() reduced to the key,
#   shape and dtype part of DatasetSummary); the user side is a small random hyperparameter search
#   in the style of the FastEstimator tutorials: every trial loads MNIST-shaped data into a
#   NumpyDataset (2000 random 28x28 images), prints it, splits 20% off for evaluation and trains
#   a small torch classifier for a few batches; 12 trials; cpu, seeded.
from functools import lru_cache

import numpy as np
import torch
import torch.nn as nn


class InMemoryDataset:
    def __init__(self, data):
        self.data = data
        self.summary = lru_cache(maxsize=1)(self.summary)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        if isinstance(index, int):
            return self.data[index]
        else:
            result = [elem[index] for elem in self.data.values()]
            if isinstance(result[0], np.ndarray):
                return np.array(result)
            return result

    def _skip_init(self, data, **kwargs):
        obj = self.__class__.__new__(self.__class__)
        obj.data = data
        for k, v in kwargs.items():
            if k == 'summary':
                continue
            else:
                obj.__setattr__(k, v)
        obj.summary = lru_cache(maxsize=1)(obj.summary)
        return obj

    def _do_split(self, splits):
        results = []
        for split in splits:
            data = {new_idx: self.data.pop(old_idx) for new_idx, old_idx in enumerate(split)}
            results.append(self._skip_init(data, **{k: v for k, v in self.__dict__.items() if k not in {'data'}}))
        self.data = {new_idx: v for new_idx, (old_idx, v) in enumerate(self.data.items())}
        self.summary.cache_clear()
        return results

    def split(self, *fractions, seed=None):
        rng = np.random.RandomState(seed)
        original_size = len(self)
        splits = []
        remaining = list(range(original_size))
        for frac in fractions:
            n = int(frac * original_size)
            chosen = sorted(rng.choice(remaining, size=n, replace=False).tolist(), reverse=True)
            remaining = [i for i in remaining if i not in set(chosen)]
            splits.append(chosen)
        results = self._do_split(splits)
        return results[0] if len(results) == 1 else results

    def summary(self):
        final_example = self[0]
        return {"num_instances": len(self),
                "keys": {key: (np.shape(val), str(getattr(val, "dtype", type(val).__name__)))
                         for key, val in final_example.items()}}

    def __str__(self):
        return str(self.summary())


class NumpyDataset(InMemoryDataset):
    def __init__(self, data):
        size = None
        for val in data.values():
            current_size = val.shape[0] if isinstance(val, np.ndarray) else len(val)
            if size is not None:
                assert size == current_size, "All data arrays must have the same number of elements"
            else:
                size = current_size
        super().__init__({i: {k: v[i] for k, v in data.items()} for i in range(size)})


def load_data(rng):
    x = rng.rand(2000, 28, 28).astype(np.float32)
    y = rng.randint(0, 10, 2000).astype(np.int64)
    return NumpyDataset({"x": x, "y": y})


torch.manual_seed(0)
rng = np.random.RandomState(0)
results = []
for trial in range(12):
    lr = float(10 ** rng.uniform(-4, -2))
    train_data = load_data(rng)
    print(train_data)
    eval_data = train_data.split(0.2, seed=trial)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for start in range(0, 256, 64):
        xb = torch.from_numpy(train_data["x"][start:start + 64])
        yb = torch.tensor(train_data["y"][start:start + 64])
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        acc = (model(torch.from_numpy(eval_data["x"])).argmax(1) == torch.tensor(eval_data["y"])).float().mean().item()
    results.append((lr, acc))
print(max(results, key=lambda r: r[1]))
