"""Move a module's or an optimizer's tensors to CPU (pinned) and back, in place.

``offload(model)`` moves every parameter, gradient and buffer to the CPU while keeping
the same ``Parameter`` objects (``param.data = ...``), so an optimizer built on them
keeps working; ``offload(optimizer)`` moves its state (``exp_avg``...). ``onload``
brings each tensor back to the device it came from. With an accelerator present the
CPU copies are page-locked (pinned), which makes the copies back faster.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

from torchmem.errors import UsageError

__all__ = ["offload", "onload"]

_HOME = "_torchmem_home"


def _check(obj: Any, who: str) -> None:
    if not isinstance(obj, (torch.nn.Module, torch.optim.Optimizer)):
        raise UsageError(
            f"torchmem.{who}: cannot move this object; expected an nn.Module or an "
            f"optimizer, got {type(obj).__name__}",
            tip="for single tensors use t.to(device) or torchmem.snapshot(t, 'cpu')",
        )


def _pinnable() -> bool:
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):
        try:
            return bool(acc.is_available())
        except RuntimeError:
            return False
    return bool(torch.cuda.is_available())


def _move(t: torch.Tensor, device: torch.device, pin: bool, non_blocking: bool) -> torch.Tensor:
    if pin and device.type == "cpu" and t.device.type != "cpu":
        out = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=True)
        out.copy_(t, non_blocking=non_blocking)
        return out
    return t.to(device, non_blocking=non_blocking)


def _module_slots(m: torch.nn.Module) -> Iterator[tuple[Any, str, torch.Tensor]]:
    for mod in m.modules():
        for name, p in mod._parameters.items():
            if p is not None:
                yield mod._parameters, name, p
        for name, b in mod._buffers.items():
            if b is not None:
                yield mod._buffers, name, b


def _apply(obj: Any, target: Any, pin: bool, non_blocking: bool, offloading: bool) -> int:
    moved = 0

    def dest(t: torch.Tensor) -> torch.device | None:
        if offloading:
            return torch.device(target)
        if target is not None:
            return torch.device(target) if _HOME in t.__dict__ else None
        home = t.__dict__.get(_HOME)
        return torch.device(home) if home is not None else None

    def remember(t: torch.Tensor) -> None:
        if offloading and _HOME not in t.__dict__:
            t.__dict__[_HOME] = str(t.device)
        elif not offloading:
            t.__dict__.pop(_HOME, None)

    if isinstance(obj, torch.nn.Module):
        done: set[int] = set()
        for _owner, _name, t in _module_slots(obj):
            if id(t) in done:
                continue  # shared (tied) weights
            done.add(id(t))
            d = dest(t)
            if d is None or t.device == d:
                remember(t)
                continue
            grad = t.grad if isinstance(t, torch.nn.Parameter) else None
            remember(t)
            with torch.no_grad():
                t.data = _move(t.data, d, pin, non_blocking)
                if grad is not None:
                    t.grad = _move(grad, d, pin, non_blocking)
            moved += t.nbytes + (grad.nbytes if grad is not None else 0)
        return moved
    for per_param in obj.state.values():
        if not isinstance(per_param, dict):
            continue
        for k, v in list(per_param.items()):
            if not isinstance(v, torch.Tensor):
                continue
            d = dest(v)
            if d is None or v.device == d:
                remember(v)
                continue
            remember(v)
            new = _move(v, d, pin, non_blocking)
            if offloading:
                new.__dict__[_HOME] = v.__dict__[_HOME]
            per_param[k] = new
            moved += v.nbytes
    return moved


def offload(obj: Any, device: Any = "cpu", *, pin_memory: bool | None = None,
            non_blocking: bool = False) -> int:
    """Move a module's parameters, gradients and buffers, or an optimizer's state, to
    ``device`` (CPU by default), remembering where each tensor came from.

    Args:
        obj: an ``nn.Module`` or an optimizer.
        device: where to put the tensors.
        pin_memory: page-locked CPU copies; default: yes when an accelerator exists.
        non_blocking: asynchronous copies (with pinned memory: synchronise before
            reading the CPU copies).

    Returns:
        Bytes moved (0 when everything already was on ``device``).

    Raises:
        UsageError: ``obj`` is neither a module nor an optimizer.

    Example:
        >>> torchmem.offload(optimizer)     # doctest: +SKIP
        >>> ...                             # evaluate with the GPU memory it freed
        >>> torchmem.onload(optimizer)      # doctest: +SKIP

    Known limitations:
        Module parameters keep their identity; optimizer state tensors are replaced
        by new ones (references you took to ``optimizer.state[p]['exp_avg']`` go
        stale). Tensors held in plain attributes are not moved.
    """
    _check(obj, "offload")
    pin = _pinnable() if pin_memory is None else bool(pin_memory)
    return _apply(obj, device, pin, non_blocking, offloading=True)


def onload(obj: Any, device: Any = None, *, non_blocking: bool = False) -> int:
    """Move what :func:`offload` moved back to where it came from (or to ``device``).

    Args:
        obj: the module or optimizer given to :func:`offload`.
        device: override the remembered home device.
        non_blocking: asynchronous copies.

    Returns:
        Bytes moved.

    Raises:
        UsageError: ``obj`` is neither a module nor an optimizer.
    """
    _check(obj, "onload")
    return _apply(obj, device, False, non_blocking, offloading=False)
