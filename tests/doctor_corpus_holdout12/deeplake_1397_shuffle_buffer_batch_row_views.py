# Source: https://github.com/activeloopai/deeplake/pull/1397
#   code: hub/integrations/pytorch/dataset.py (SubIterableDataset) and hub/integrations/pytorch/shuffle_buffer.py
#         at the parent of d95fd9de
# Adapted: TorchDataset (which streams chunks from a hub dataset through worker processes) is replaced by
# an IterableDataset yielding dicts of random numpy images and labels, the inner DataLoader runs with
# num_workers=0, IterableOrderedDict is a plain dict; a small classifier is trained on the shuffled stream,
# 4800 samples of 3x64x64 with a 24 MB shuffle buffer on CPU.
from functools import reduce
from operator import mul
from random import randrange
from typing import Any, List
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.utils.data
from torch.utils.data import DataLoader

MB = 1024 * 1024


class ShuffleBuffer:
    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError("Buffer size should be positive value more than zero")
        self.size = size
        self.buffer: List[Any] = list()
        self.buffer_used = 0

    def exchange(self, sample):
        buffer_len = len(self.buffer)
        if not sample is None:
            sample_size = self._sample_size(sample)
            if self.buffer_used + sample_size <= self.size:
                self.buffer_used += sample_size
                self.buffer.append(sample)
                return None
            if buffer_len == 0:
                warnings.warn(f"Buffer size is too small. Sample with size {sample_size} does not fit in buffer of size {self.size}")
                return sample
            selected = randrange(buffer_len)
            val = self.buffer[selected]
            self.buffer[selected] = sample
            self.buffer_used += sample_size
            self.buffer_used -= self._sample_size(val)
            return val
        else:
            if buffer_len > 0:
                selected = randrange(buffer_len)
                val = self.buffer.pop(selected)
                self.buffer_used -= self._sample_size(val)
                return val
            else:
                return None

    def emtpy(self) -> bool:
        return len(self.buffer) == 0

    def _sample_size(self, sample):
        return sum([tensor.storage().element_size() * reduce(mul, tensor.shape, 1) for _, tensor in sample.items()])


class TorchDataset(torch.utils.data.IterableDataset):
    def __init__(self, num_samples):
        self.num_samples = num_samples

    def __iter__(self):
        for _ in range(self.num_samples):
            yield {"images": np.random.rand(3, 64, 64).astype(np.float32), "labels": np.random.randint(0, 10)}

    def __len__(self):
        return self.num_samples


class SubIterableDataset(torch.utils.data.IterableDataset):
    def __init__(self, dataset, num_workers: int = 0, buffer_size: int = 512, batch_size: int = 0, collate_fn=None):
        super().__init__()
        self.torch_datset = dataset
        self.num_workers = num_workers
        self.batch_size = batch_size
        self.collate_fn = collate_fn
        self.buffer_size = buffer_size * MB

    def __iter__(self):
        buffer = ShuffleBuffer(self.buffer_size) if self.buffer_size > 0 else None
        sub_loader = DataLoader(self.torch_datset, batch_size=self.batch_size, num_workers=self.num_workers,
                                collate_fn=self.collate_fn)
        it = iter(sub_loader)
        try:
            while True:
                next_batch = next(it)
                batch_keys = list(next_batch.keys())
                for i in range(len(next_batch[batch_keys[0]])):
                    val = dict({k: next_batch[k][i] for k in batch_keys})
                    if buffer is not None:
                        result = buffer.exchange(val)
                        if result:
                            yield result
                    else:
                        yield val
                del next_batch, batch_keys
        except StopIteration:
            pass
        if buffer is not None:
            while not buffer.emtpy():
                yield buffer.exchange(None)
        del sub_loader

    def __len__(self):
        return len(self.torch_datset)


model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 31 * 31, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
dataset = SubIterableDataset(TorchDataset(4800), buffer_size=24, batch_size=64)
loader = DataLoader(dataset, batch_size=16, num_workers=0)
for step, batch in enumerate(loader):
    loss = nn.functional.cross_entropy(model(batch["images"]), batch["labels"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 40 == 0:
        print(step, round(loss.item(), 4))
