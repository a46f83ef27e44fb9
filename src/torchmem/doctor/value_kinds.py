"""What a culprit holds, as kinds a fix can be checked against (no reference is kept).

A fix may call ``.item()`` only on 0-dim tensors and ``.detach()`` only on tensors
(:mod:`torchmem.doctor.edits`); the walk records, for each path, the kinds of the last
values of a container, or the kind of the object itself.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

import torch

__all__ = ["value_kinds", "objects_only"]

#: values of a container whose kinds :func:`value_kinds` reads (the last ones: growth appends)
_KINDS_SAMPLE = 32


def _value_kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "0-dim tensor" if value.dim() == 0 else "tensor"
    if isinstance(value, (bool, int, float, complex)):
        return "number"
    if value is None:
        return "None"
    if isinstance(value, (list, tuple, dict, set, frozenset, deque)):
        return type(value).__name__
    return "object"


def value_kinds(obj: Any) -> tuple[str, ...]:
    """The sorted kinds of what ``obj`` holds: ``0-dim tensor``, ``tensor``, ``number``,
    ``None``, a container type name or ``object``, for a container's last values; the
    kind of ``obj`` itself otherwise (a fix may call ``.item()`` only on 0-dim tensors)."""
    try:
        if isinstance(obj, dict):
            values = list(itertools.islice(reversed(obj.values()), _KINDS_SAMPLE))
        elif isinstance(obj, (list, tuple)):
            values = list(obj[-_KINDS_SAMPLE:])
        elif isinstance(obj, deque):
            values = list(itertools.islice(reversed(obj), _KINDS_SAMPLE))
        elif isinstance(obj, (set, frozenset)):
            values = list(itertools.islice(obj, _KINDS_SAMPLE))
        else:
            return (_value_kind(obj),)
        return tuple(sorted({_value_kind(v) for v in values}))
    except Exception:  # noqa: BLE001 - an odd container: no evidence
        return ()


def objects_only(holds: tuple[str, ...]) -> bool:
    """Whether kinds read by :func:`value_kinds` are objects only (``None`` aside): no tensor
    nor container of them, so nothing to detach or reduce, only objects to let go of."""
    return "object" in holds and set(holds) <= {"object", "None"}
