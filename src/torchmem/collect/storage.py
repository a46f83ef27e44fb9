"""Views and copies: does a tensor share memory with another, and how much does it pin?

``torchmem.shares_storage(a, b)`` answers "will writing to ``a`` change ``b``, and does
``b`` keep ``a``'s memory alive?"; ``torchmem.storage_info(t)`` says where ``t`` sits
on its storage and how many bytes it addresses versus how many it keeps allocated.
See ``docs/views-and-copies.md`` for which operations return views.

Both read metadata only (no data is touched, nothing is synchronised) and keep no
reference to the tensors.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchmem.collect.graph import storage_key, storage_nbytes
from torchmem.errors import UsageError
from torchmem.model.census import StorageInfo

__all__ = ["shares_storage", "storage_info", "used_bytes", "span_bytes", "dtype_name"]

_DTYPE_NAMES: dict[torch.dtype, str] = {}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (cached)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES.setdefault(dtype, str(dtype).removeprefix("torch."))
    return name


def _check(t: object, arg: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise UsageError(
            f"torchmem.storage: {arg} must be a tensor; expected torch.Tensor, got {type(t).__name__}",
            tip="pass the tensor itself, not a shape, a number or a storage",
        )
    return t


def shares_storage(a: Tensor, b: Tensor) -> bool:
    """True when ``a`` and ``b`` are backed by the same storage (views of each other).

    Unlike comparing ``data_ptr()`` values, this is right for empty tensors (which all
    have a null data pointer), for views that start at different offsets, and it does
    not use the deprecated ``Tensor.storage()``.

    Args:
        a: a tensor.
        b: another tensor.

    Returns:
        Whether both are views of one storage. Sparse, nested-without-storage and meta
        tensors share nothing.

    Raises:
        UsageError: ``a`` or ``b`` is not a tensor.

    Example:
        >>> import torch, torchmem
        >>> x = torch.zeros(4, 4)
        >>> torchmem.shares_storage(x, x[1:, ::2]), torchmem.shares_storage(x, x.clone())
        (True, False)
    """
    ka = storage_key(_check(a, "a"))
    kb = storage_key(_check(b, "b"))
    return ka is not None and ka == kb


def span_bytes(t: Tensor) -> int:
    """Bytes from the first to the last element ``t`` addresses (0 when empty)."""
    if t.numel() == 0:
        return 0
    span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    return span * t.element_size()


def used_bytes(t: Tensor) -> int:
    """Bytes of the distinct elements ``t`` addresses: ``numel * element_size``, capped
    by the span (an ``expand``-ed tensor with stride 0 reads few distinct elements)."""
    return min(t.numel() * t.element_size(), span_bytes(t))


def storage_info(t: Tensor) -> StorageInfo:
    """Where ``t`` sits on its storage and how much of it ``t`` actually uses.

    Args:
        t: a strided tensor (CPU, CUDA or any device with storages).

    Returns:
        A :class:`~torchmem.model.census.StorageInfo` holding plain data only.
        ``storage_bytes - used_bytes`` is what ``t`` keeps allocated without using:
        ``t.clone()`` would need only ``used_bytes``.

    Raises:
        UsageError: ``t`` is not a tensor, or has no storage (sparse, meta).

    Example:
        >>> import torch, torchmem
        >>> x = torch.zeros(100, 1000)
        >>> info = torchmem.storage_info(x[0, :10])
        >>> info.used_bytes, info.storage_bytes, info.is_view
        (40, 400000, True)
    """
    _check(t, "t")
    key = storage_key(t)
    if key is None:
        raise UsageError(
            f"torchmem.storage_info: tensor has no plain storage; expected a strided tensor "
            f"on a real device, got layout={t.layout} device={t.device}",
            tip="for sparse tensors inspect t.values() and t.indices()",
        )
    base = t._base
    return StorageInfo(
        key=key,
        device=str(t.device),
        dtype=dtype_name(t.dtype),
        shape=tuple(t.shape),
        stride=tuple(t.stride()),
        storage_offset=int(t.storage_offset()),
        element_size=int(t.element_size()),
        is_contiguous=bool(t.is_contiguous()),
        is_view=base is not None,
        base_shape=tuple(base.shape) if base is not None else None,
        used_bytes=used_bytes(t),
        span_bytes=span_bytes(t),
        storage_bytes=storage_nbytes(t),
    )
