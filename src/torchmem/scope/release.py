"""Explicit release: free the memory of tensors, a module or an optimizer's state now.

``torchmem.release(obj)`` is TorchSharp's ``Dispose()`` for PyTorch: the storages
behind ``obj``'s tensors are resized to 0 bytes at once, whatever else still refers to
them, and the tensor objects become released tensors, so a later use raises
:class:`~torchmem.errors.ReleasedTensorError` (naming the ``file:line`` of the release)
instead of reading freed memory.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from torchmem.errors import UsageError
from torchmem.scope._free import (
    caller_location,
    free_storage,
    invalidate,
    is_released,
    mark_released,
)
from torchmem.scope._graphs import NO_GRAPHS, can_account
from torchmem.scope._objects import is_supported, iter_tensors

__all__ = ["release"]


def release(obj: Any, *, force: bool = False) -> int:
    """Free the storages of every tensor in ``obj`` now; return the bytes freed.

    Args:
        obj: a tensor; a (nested) list/tuple/dict of tensors; an ``nn.Module`` (its
            parameters, their gradients and its buffers); an optimizer (its state:
            ``exp_avg``, momentum buffers...).
        force: free storages that something outside ``obj`` also uses: views or
            ``.data`` aliases made elsewhere, or a live autograd graph that saved them
            for backward. Torch does not check bounds, so those other tensors would
            read freed memory; the default refuses. With ``force=True`` the storages
            are freed anyway and their version counters are bumped, so a backward pass
            through such a graph raises torch's "modified by an inplace operation"
            error instead of reading freed memory; other aliases are not protected.

    Returns:
        Bytes returned to the allocator (each storage counted once; views of one
        storage are one storage).

    Raises:
        UsageError: ``obj`` is not a tensor, container, module or optimizer; or a
            storage is used outside ``obj`` (views, aliases, a live autograd graph
            that saved it) and ``force`` is False.
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
    # a leaf released together with its gradient is what holds that gradient
    grads = Counter(id(t.grad) for t in tensors
                    if t.is_leaf and t.requires_grad and t.grad is not None)
    accounted: dict[int, list[torch.Tensor]] = {}
    for key, st in storages.items():
        impls = can_account(st, key, groups[key], NO_GRAPHS, grads)
        if impls is None and not force:
            raise UsageError(
                "torchmem.release: a storage is still used by something outside the "
                "object; expected only its own "
                f"{len(groups[key])} tensor(s) to use it, got another user (a view or "
                "alias you did not pass, or a live autograd graph that saved it for "
                "backward)",
                tip="release the views/aliases together (a list), run or drop the "
                "graph first (backward, or del the loss), or pass force=True",
            )
        accounted[key] = impls if impls is not None else groups[key]
    for key in storages:
        invalidate(accounted[key])  # a graph that still saved it fails clearly, never reads it
    freed = sum(free_storage(st) for st in storages.values())
    by = f"torchmem.release() called at {caller_location()}"
    mark_released(tensors, by)
    mark_released([t for impls in accounted.values() for t in impls if id(t) not in seen], by)
    return freed
