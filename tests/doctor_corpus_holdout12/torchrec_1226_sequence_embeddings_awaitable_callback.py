# Source: https://github.com/meta-pytorch/torchrec/pull/1226
#   code: torchrec/distributed/types.py (Awaitable, NoWait) and torchrec/distributed/dist_data.py
#         (SequenceEmbeddingsAwaitable, SequenceEmbeddingsAllToAll) at the parent of 2541ad09
# Adapted: single process, so alltoall_sequence is a stub that returns NoWait of the local embeddings
# (no process group, codecs or fbgemm ops); record_function is dropped; a sharded-embedding-like module
# looks up rows of one embedding table for random ids with a row-wise unbucketize permutation and a small
# sequence model is trained on top, 150 steps on CPU.
import abc
from typing import Callable, Generic, List, Optional, TypeVar

import torch
import torch.nn as nn

W = TypeVar("W")


class Awaitable(abc.ABC, Generic[W]):
    def __init__(self) -> None:
        self._callbacks: List[Callable[[W], W]] = []

    @abc.abstractmethod
    def _wait_impl(self) -> W:
        pass

    def wait(self) -> W:
        ret: W = self._wait_impl()
        for callback in self.callbacks:
            ret = callback(ret)
        return ret

    @property
    def callbacks(self) -> List[Callable[[W], W]]:
        return self._callbacks


class NoWait(Awaitable[W]):
    def __init__(self, obj: W) -> None:
        super().__init__()
        self._obj = obj

    def _wait_impl(self) -> W:
        return self._obj


def alltoall_sequence(a2a_sequence_embs_tensor, forward_recat_tensor, backward_recat_tensor,
                      lengths_after_sparse_data_all2all, input_splits, output_splits,
                      variable_batch_size=False, group=None, codecs=None):
    return NoWait(a2a_sequence_embs_tensor)


class SequenceEmbeddingsAwaitable(Awaitable[torch.Tensor]):
    def __init__(self, tensor_awaitable: Awaitable[torch.Tensor],
                 unbucketize_permute_tensor: Optional[torch.Tensor], embedding_dim: int) -> None:
        super().__init__()
        self._tensor_awaitable = tensor_awaitable
        self._unbucketize_permute_tensor = unbucketize_permute_tensor
        self._embedding_dim = embedding_dim

        if self._unbucketize_permute_tensor is not None:
            self.callbacks.append(
                lambda ret: torch.index_select(
                    ret.view(-1, self._embedding_dim),
                    0,
                    self._unbucketize_permute_tensor,
                )
            )

    def _wait_impl(self) -> torch.Tensor:
        ret = self._tensor_awaitable.wait()
        return ret


class SequenceEmbeddingsAllToAll(nn.Module):
    def __init__(self, features_per_rank: List[int]) -> None:
        super().__init__()
        self._local_split = features_per_rank[0]
        self._num_splits = len(features_per_rank)
        self.register_buffer("_forward_recat_tensor", torch.arange(self._local_split, dtype=torch.int))
        self.register_buffer("_backward_recat_tensor", torch.arange(self._local_split, dtype=torch.int))

    def forward(self, local_embs, lengths, input_splits, output_splits, unbucketize_permute_tensor=None):
        tensor_awaitable = alltoall_sequence(
            a2a_sequence_embs_tensor=local_embs,
            forward_recat_tensor=self._forward_recat_tensor,
            backward_recat_tensor=self._backward_recat_tensor,
            lengths_after_sparse_data_all2all=lengths,
            input_splits=input_splits,
            output_splits=output_splits,
        )
        return SequenceEmbeddingsAwaitable(
            tensor_awaitable=tensor_awaitable,
            unbucketize_permute_tensor=unbucketize_permute_tensor,
            embedding_dim=local_embs.shape[1],
        )


class ShardedSequenceEmbedding(nn.Module):
    def __init__(self, num_embeddings=20000, embedding_dim=128):
        super().__init__()
        self.table = nn.Embedding(num_embeddings, embedding_dim)
        self.output_dist = SequenceEmbeddingsAllToAll([1])

    def forward(self, ids, lengths):
        bucket_order = torch.argsort(ids % 4, stable=True)
        local_embs = self.table(ids[bucket_order])
        unbucketize_permute_tensor = torch.argsort(bucket_order)
        return self.output_dist(local_embs, lengths, [ids.numel()], [ids.numel()], unbucketize_permute_tensor)


class SequenceModel(nn.Module):
    def __init__(self, embedding_dim=128):
        super().__init__()
        self.embedding = ShardedSequenceEmbedding(embedding_dim=embedding_dim)
        self.over = nn.Sequential(nn.Linear(embedding_dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, ids, lengths):
        seq_embs = self.embedding(ids.view(-1), lengths).wait()
        seq_embs = seq_embs.view(ids.shape[0], ids.shape[1], -1).mean(dim=1)
        return self.over(seq_embs).squeeze(-1)


model = SequenceModel()
optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
for step in range(150):
    ids = torch.randint(0, 20000, (256, 32))
    lengths = torch.full((256,), 32)
    labels = torch.randint(0, 2, (256,)).float()
    logits = model(ids, lengths)
    loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")
