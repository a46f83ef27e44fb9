"""Snapshots: independent copies that never alias live tensors (``detach`` + copy).

``x.detach()`` shares memory with ``x``; ``model.state_dict()`` returns tensors that
share memory with the parameters, so a "best weights" dict taken that way silently
follows training. A snapshot owns its memory, has no autograd history, and can be put
on another device (``"cpu"`` to spare accelerator memory).
"""

from __future__ import annotations

from typing import Any

import torch

from torchmem.errors import UsageError

__all__ = ["snapshot", "snapshot_state"]


def _copy(t: torch.Tensor, device: Any, pin_memory: bool) -> torch.Tensor:
    d = t.detach()
    target = torch.device(device) if device is not None else d.device
    if pin_memory and target.type == "cpu":
        out = torch.empty(d.shape, dtype=d.dtype, device="cpu", pin_memory=True)
        out.copy_(d)
        return out
    if target == d.device:
        return d.clone()
    return d.to(target, copy=True)


def _map(value: Any, device: Any, pin_memory: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return _copy(value, device, pin_memory)
    if isinstance(value, dict):
        out = type(value)() if type(value) is not dict else {}
        for k, v in value.items():
            out[k] = _map(v, device, pin_memory)
        return out
    if isinstance(value, list):
        return [_map(v, device, pin_memory) for v in value]
    if isinstance(value, tuple):
        items = [_map(v, device, pin_memory) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def snapshot(obj: Any, device: Any = None, *, pin_memory: bool = False) -> Any:
    """Detached, independent copy of a tensor (or of every tensor in a container).

    Args:
        obj: a tensor, or a (nested) dict/list/tuple holding tensors.
        device: where the copy lives (default: where each tensor is).
        pin_memory: with a CPU target, allocate page-locked memory (faster copies back
            to an accelerator; needs an accelerator build).

    Returns:
        The copy: same shape, dtype and values, ``requires_grad=False``, no storage
        shared with ``obj``. Containers are rebuilt; non-tensor values are shared.

    Example:
        >>> best = torchmem.snapshot(model.state_dict(), "cpu")   # doctest: +SKIP
    """
    return _map(obj, device, pin_memory)


def snapshot_state(obj: Any, device: Any = "cpu", *, pin_memory: bool = False) -> dict[str, Any]:
    """A state dict that does not alias live parameters (best-weights checkpoints).

    Args:
        obj: an ``nn.Module`` or an optimizer (anything with ``state_dict()``).
        device: where the copied tensors live (default ``"cpu"``; ``None`` keeps each
            tensor's device).
        pin_memory: with a CPU target, use page-locked memory.

    Returns:
        ``obj.state_dict()`` with every tensor replaced by a detached copy; pass it to
        ``load_state_dict`` to restore.

    Raises:
        UsageError: ``obj`` has no ``state_dict()``.

    Example:
        >>> best = torchmem.snapshot_state(model)          # doctest: +SKIP
        >>> model.load_state_dict(best)                    # doctest: +SKIP
    """
    state_dict = getattr(obj, "state_dict", None)
    if not callable(state_dict):
        raise UsageError(
            "torchmem.snapshot_state: the object has no state_dict(); expected an "
            f"nn.Module or an optimizer, got {type(obj).__name__}",
            tip="use torchmem.snapshot() for tensors and containers",
        )
    return _map(state_dict(), device, pin_memory)  # type: ignore[no-any-return]
