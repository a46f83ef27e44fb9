"""Walk and rebuild nested batches: tensors inside tuples, lists, dicts, namedtuples and
dataclasses (what a ``DataLoader`` yields)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from torchmem.errors import is_oom  # re-exported: the one OOM test, shared with the doctor

__all__ = ["map_tensors", "iter_tensors", "is_oom"]


def map_tensors(fn: Callable[[torch.Tensor], Any], obj: Any) -> Any:
    """Return ``obj`` with every tensor ``t`` inside it replaced by ``fn(t)``.

    Containers are rebuilt with their own type (namedtuples and dataclasses included);
    anything else is returned unchanged.
    """
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        items = [map_tensors(fn, v) for v in obj]
        if hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*items)
        return type(obj)(items) if type(obj) is not tuple else tuple(items)
    if isinstance(obj, list):
        return [map_tensors(fn, v) for v in obj]
    if isinstance(obj, dict):
        try:
            return type(obj)((k, map_tensors(fn, v)) for k, v in obj.items())
        except TypeError:
            return {k: map_tensors(fn, v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: map_tensors(fn, getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if f.init
        }
        return dataclasses.replace(obj, **changes)
    return obj


def iter_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Yield every tensor inside a nested batch, depth first."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from iter_tensors(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from iter_tensors(v)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from iter_tensors(getattr(obj, f.name))
