"""Explicit release: free the memory of tensors, a module or an optimizer's state now.

``torchmem.release(obj)`` is TorchSharp's ``Dispose()`` for PyTorch: the storages
behind ``obj``'s tensors are resized to 0 bytes at once, whatever else still refers to
them, and the tensor objects become released tensors, so a later use raises
:class:`~torchmem.errors.ReleasedTensorError` (naming the ``file:line`` of the release)
instead of reading freed memory.
"""

from __future__ import annotations

from typing import Any

import torch

from torchmem.errors import UsageError
from torchmem.scope._free import (
    caller_location,
    free_storage,
    is_released,
    mark_released,
    use_count,
)
from torchmem.scope._objects import is_supported, iter_tensors

__all__ = ["release"]


def release(obj: Any, *, force: bool = False) -> int:
    """Free the storages of every tensor in ``obj`` now; return the bytes freed.

    Args:
        obj: a tensor; a (nested) list/tuple/dict of tensors; an ``nn.Module`` (its
            parameters, their gradients and its buffers); an optimizer (its state:
            ``exp_avg``, momentum buffers...).
        force: free storages that other tensors torchmem cannot reach also point at
            (views or ``.data`` aliases made elsewhere). Those other tensors then read
            freed memory if used, so the default refuses.

    Returns:
        Bytes returned to the allocator (each storage counted once; views of one
        storage are one storage).

    Raises:
        UsageError: ``obj`` is not a tensor, container, module or optimizer; or a
            storage is shared with tensors outside ``obj`` and ``force`` is False.
            Nothing is freed when an error is raised.

    Example:
        >>> freed = torchmem.release(optimizer)   # doctest: +SKIP
        >>> torchmem.release(model)               # the model is unusable afterwards

    Known limitations:
        The Python names stay bound; any use of them raises ReleasedTensorError.
        Tensor subclasses other than ``nn.Parameter`` are freed but keep their class.
        A module whose parameters were released cannot be reloaded with
        ``load_state_dict`` (build a new one).
    """
    if not is_supported(obj):
        raise UsageError(
            "torchmem.release: cannot release this object; expected a tensor, a "
            f"container of tensors, an nn.Module or an optimizer, got {type(obj).__name__}",
            tip="see docs/cleanup.md",
        )
    tensors: list[torch.Tensor] = []
    seen: set[int] = set()
    groups: dict[int, list[torch.Tensor]] = {}
    storages: dict[int, Any] = {}
    for t in iter_tensors(obj):
        if id(t) in seen or is_released(t):
            continue
        seen.add(id(t))
        tensors.append(t)
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError, TypeError, AttributeError):
            continue
        key = int(st._cdata)
        storages.setdefault(key, st)
        groups.setdefault(key, []).append(t)
    if not force:
        for key, st in storages.items():
            count = use_count(st)
            # one reference per tensor impl, plus the Python storage object we hold
            if count is not None and count > len(groups[key]) + 1:
                raise UsageError(
                    "torchmem.release: a storage is shared with tensors outside the "
                    f"object; expected only its own {len(groups[key])} tensor(s), got "
                    f"{count - 1} references",
                    tip="release the views/aliases together (a list), drop them first, "
                    "or pass force=True",
                )
    freed = sum(free_storage(st) for st in storages.values())
    mark_released(tensors, f"torchmem.release() called at {caller_location()}")
    return freed
