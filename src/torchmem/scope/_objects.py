"""Private helper: the tensors inside the objects users hand to torchmem.

Accepted: a tensor; a list, tuple, set or dict of them (nested, namedtuples and dict
values included); an ``nn.Module`` (its parameters, their ``.grad`` and its buffers);
an optimizer (the tensors of its ``state``). Anything else is skipped.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator

import torch

__all__ = ["iter_tensors", "is_supported", "captured_tensors"]


def is_supported(obj: Any) -> bool:
    """True when :func:`iter_tensors` understands ``obj``."""
    return isinstance(
        obj, (torch.Tensor, list, tuple, set, frozenset, dict, torch.nn.Module,
              torch.optim.Optimizer)
    )


def iter_tensors(obj: Any, *, grads: bool = True, _depth: int = 0) -> Iterator[torch.Tensor]:
    """Yield every tensor inside ``obj`` (duplicates possible).

    Args:
        obj: a tensor, container, module or optimizer.
        grads: with a module, also yield each parameter's ``.grad``.
    """
    if _depth > 64:
        return
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from iter_tensors(v, grads=grads, _depth=_depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            yield from iter_tensors(v, grads=grads, _depth=_depth + 1)
    elif isinstance(obj, torch.nn.Module):
        for p in obj.parameters():
            yield p
            if grads and p.grad is not None:
                yield p.grad
        yield from obj.buffers()
    elif isinstance(obj, torch.optim.Optimizer):
        for state in obj.state.values():
            yield from iter_tensors(state, grads=grads, _depth=_depth + 1)


def named_tensors(value: Any, name: str, *, max_depth: int = 6,
                  _depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """Tensors inside nested dicts/lists/tuples of ``value``, named as a user indexes them.

    Example:
        ``named_tensors({"x": [a, b]}, "batch")`` yields ``("batch['x'][0]", a)`` and
        ``("batch['x'][1]", b)``.
    """
    if isinstance(value, torch.Tensor):
        yield name, value
    elif _depth < max_depth and isinstance(value, dict):
        for k, v in value.items():
            yield from named_tensors(v, f"{name}[{k!r}]", max_depth=max_depth, _depth=_depth + 1)
    elif _depth < max_depth and isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from named_tensors(v, f"{name}[{i}]", max_depth=max_depth, _depth=_depth + 1)


def captured_tensors(fn: Any, _depth: int = 0) -> Iterator[torch.Tensor]:
    """Tensors a callable can reach without running: closure cells, default arguments,
    ``functools.partial`` arguments, and the attributes of a bound method's object
    (one level, containers included)."""
    if _depth > 3 or fn is None:
        return
    if isinstance(fn, torch.Tensor):
        yield fn
        return
    if isinstance(fn, functools.partial):
        yield from captured_tensors(fn.func, _depth + 1)
        for v in (*fn.args, *fn.keywords.values()):
            yield from iter_tensors(v)
        return
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        for v in getattr(owner, "__dict__", {}).values():
            yield from iter_tensors(v) if is_supported(v) else ()
        fn = getattr(fn, "__func__", fn)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(v) and not isinstance(v, (torch.Tensor, torch.nn.Module)):
            yield from captured_tensors(v, _depth + 1)
        elif is_supported(v):
            yield from iter_tensors(v)
    for v in (*(getattr(fn, "__defaults__", None) or ()),
              *(getattr(fn, "__kwdefaults__", None) or {}).values()):
        if is_supported(v):
            yield from iter_tensors(v)
