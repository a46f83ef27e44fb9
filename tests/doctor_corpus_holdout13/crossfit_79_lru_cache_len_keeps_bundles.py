# Source: https://github.com/rapidsai/crossfit/issues/79
#   code: crossfit/data/dataframe/core.py (FrameBackend, ArrayBundle with its lru_cache'd
#   __len__, assign, apply, CrossFrame dispatch for dicts and torch tensors),
#   crossfit/backend/torch/loader.py (InMemoryLoader, SortedSeqLoader) and
#   crossfit/backend/torch/op/base.py (Predictor.call) before the fix in
#   https://github.com/rapidsai/crossfit/pull/80
# Adapted: cudf, cupy and dask are not installed: partitions are dicts of torch tensors
#   (random token ids padded with 0) and the predictions are concatenated as a numpy array
#   instead of a cudf list column; the HF model is a small embedding classifier with a
#   max_seq_length of 64; no progress bar, out-of-memory retry or batch-size search (the
#   sorted loader cuts fixed batches of 64 rows); 60 partitions of 512 rows.
from functools import lru_cache

import numpy as np
import torch
import torch.nn as nn


class FrameBackend:
    def __init__(self, data):
        self.data = data

    def __getitem__(self, key):
        return self.data[key]


class ArrayBundle(FrameBackend):
    @lru_cache
    def __len__(self):
        _len = None
        for k, v in self.data.items():
            if _len is None:
                _len = len(v)
            elif len(v) != _len:
                raise ValueError(f"Column {k} was length {len(v)}, but expected length {_len}")
        return _len

    @property
    def columns(self):
        return list(self.data.keys())

    def to_dict(self):
        return self.data

    def cast(self, cls):
        return self.__class__({k: torch.as_tensor(v) for k, v in self.data.items()})

    def assign(self, **kwargs):
        data = self.data.copy()
        for k, v in kwargs.items():
            if self.columns and len(v) != len(self):
                raise ValueError(f"Column {k} was length {len(v)}, but expected length {len(self)}")
        data.update(**kwargs)
        return self.__class__(data)

    def apply(self, func, *args, **kwargs):
        return self.__class__({k: func(v, *args, **kwargs) for k, v in self.data.items()})


def CrossFrame(data):
    if isinstance(data, ArrayBundle):
        return data
    return ArrayBundle(dict(data))


class InMemoryLoader:
    def __init__(self, data, batch_size, max_seq_len=None):
        self.data = CrossFrame(data).cast(torch.Tensor)
        self.tensor_dict = self.data.to_dict()
        self._batch_size = batch_size
        self.num_rows = len(next(iter(self.tensor_dict.values())))
        self.current_idx = 0
        self._to_map = []
        self.max_seq_len = max_seq_len

    def map(self, fn):
        self._to_map.append(fn)
        return self

    def __iter__(self):
        return self

    def __next__(self):
        if self.current_idx >= self.num_rows:
            raise StopIteration
        end = self._batch_size + self.current_idx
        batch = {key: val[self.current_idx:end, :self.max_seq_len] for key, val in self.tensor_dict.items()
                 if key != "seq_length"}
        self.current_idx += self._batch_size
        for fn in self._to_map:
            batch = fn(**batch)
        return batch


class SortedSeqLoader(InMemoryLoader):
    def __init__(self, data, model, sort_key="input_ids", initial_batch_size=64):
        self.sort_key = sort_key
        self.pad_token_id = 0
        frame = CrossFrame(data).cast(torch.Tensor)
        seq_length = (frame[sort_key] != self.pad_token_id).sum(axis=1)
        self.sorted_indices = seq_length.argsort(descending=True)
        frame = frame.apply(lambda x: x[self.sorted_indices])
        frame = frame.assign(seq_length=seq_length[self.sorted_indices])
        super().__init__(frame, initial_batch_size, max_seq_len=model.max_seq_length())


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(30522, 32)
        self.head = nn.Linear(32, 3)

    def max_seq_length(self):
        return 64

    def forward(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1).clamp_min(1)
        return self.head(pooled).softmax(-1)


class Predictor:
    def __init__(self, model, batch_size=64):
        self.model, self.batch_size = model, batch_size

    @torch.no_grad()
    def call(self, data):
        loader = SortedSeqLoader(data, self.model, initial_batch_size=self.batch_size)
        del data
        all_outputs_ls = []
        for output in loader.map(self.model):
            all_outputs_ls.append(output)
        outputs = torch.cat(all_outputs_ls).numpy()
        order = np.argsort(loader.sorted_indices.numpy())
        del all_outputs_ls
        del loader
        return outputs[order]


def make_partition(n_rows=512, seq_len=128):
    lengths = torch.randint(8, seq_len, (n_rows,))
    input_ids = torch.randint(1, 30522, (n_rows, seq_len)) * (torch.arange(seq_len) < lengths[:, None])
    return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long()}


torch.manual_seed(0)
predictor = Predictor(Model().eval())
results = []
for partition_id in range(60):
    preds = predictor.call(make_partition())
    results.append(preds.argmax(1).mean())
print("mean label", float(np.mean(results)))
