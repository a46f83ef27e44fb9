"""Private helper: the tensors inside the objects users hand to torchmem.

Accepted: a tensor; a list, tuple, set or dict of them (nested, namedtuples and dict
values included); an ``nn.Module`` (its parameters, their ``.grad`` and its buffers);
an optimizer (the tensors of its ``state``). Anything else is skipped.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

__all__ = ["iter_tensors", "is_supported"]


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
