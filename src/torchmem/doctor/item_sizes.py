"""An estimate of the heap a Python container takes with its items (no reference is kept).

Tensor storage is measured exactly by the walk; a list of floats or of numpy arrays is
not tensor storage, yet it fills the heap as surely. :func:`estimated_bytes` estimates
it from :func:`sys.getsizeof`: the container itself, plus its length times the mean size
of its *last* items (growth appends, so those are what each step adds), each item counted
with what it holds down to three levels, sampled the same way (a tuple ``(step, loss)``
counts its two numbers; an object of the script's classes counts its attributes' values,
so a graph object of lists of feature lists counts its floats); the items are read from
the last one back until :data:`BUDGET` objects have been read, and their mean size is
taken. It is an estimate: items shared with other containers are counted again (shared
within the estimate, once), deeper levels are not counted, and the allocator's own
overhead is left out. A numpy array's :func:`sys.getsizeof` includes its data when it
owns it; a tensor's does not (its storage is measured by the walk).
"""

from __future__ import annotations

import itertools
import sys
from collections import deque
from typing import Any

__all__ = ["estimated_bytes", "last_item_type", "SAMPLE", "BUDGET"]

#: items whose sizes are read per container (the last ones), and per item one level down
SAMPLE = 16
#: levels below a container's items whose sizes are read (sampled the same way): a list
#: of objects whose attributes are lists of lists of floats is counted to its floats
_DEPTH = 3
#: objects whose sizes one estimate reads before it stops going deeper (its cost bound)
BUDGET = 1024
#: modules whose objects are not opened (their memory is measured elsewhere, or is not
#: the script's): torch (tensor storage is measured by the walk), builtins, numpy
_OPAQUE = frozenset({"builtins", "torch", "numpy", "torch.nn.parameter"})
_CONTAINERS = (list, tuple, dict, set, frozenset, deque)


def _last(obj: Any, n: int) -> list[Any]:
    """The last ``n`` values of a container (a dict's keys and values), most recent first."""
    if isinstance(obj, dict):
        pairs = itertools.islice(reversed(obj.items()), n)
        return [x for kv in pairs for x in kv]
    if isinstance(obj, (list, tuple, deque)):
        return list(itertools.islice(reversed(obj), n))
    return list(itertools.islice(obj, n))  # a set: any n


def _item_bytes(item: Any, depth: int = 0, seen: set[int] | None = None) -> int:
    """Bytes of ``item`` with what it holds down to :data:`_DEPTH` levels; an object met
    before in the same estimate (``seen``: a float shared by every row) counts once."""
    if seen is not None:
        if id(item) in seen:
            return 0
        seen.add(id(item))
    size = sys.getsizeof(item, 0)
    deeper = depth < _DEPTH and (seen is None or len(seen) < BUDGET)
    if isinstance(item, _CONTAINERS) and len(item):
        inner = _last(item, SAMPLE)
        if inner:
            sizes = [_item_bytes(x, depth + 1, seen) for x in inner] if deeper else [
                sys.getsizeof(x, 0) for x in inner]
            count = 2 * len(item) if isinstance(item, dict) else len(item)
            size += int(sum(sizes) / len(sizes) * count)
    elif deeper and type(item).__module__ not in _OPAQUE:
        # an instance of a script's class: the values of its attributes (a graph object
        # of lists of features), as a container's items
        try:
            attrs = vars(item)
        except TypeError:
            return size
        if type(attrs) is dict:
            size += sys.getsizeof(attrs, 0) + sum(
                _item_bytes(v, depth + 1, seen) for v in itertools.islice(attrs.values(), SAMPLE))
    return size


def estimated_bytes(obj: Any) -> int | None:
    """Estimated heap bytes of the container ``obj`` with its items (see the module), or
    None when ``obj`` is not a container or refuses to be measured.

    Example:
        >>> estimated_bytes([1.5] * 0) == sys.getsizeof([])
        True
        >>> estimated_bytes([float(i) for i in range(100)]) >= 100 * sys.getsizeof(1.5)
        True
    """
    if not isinstance(obj, _CONTAINERS):
        return None
    try:
        n = len(obj)
        total = sys.getsizeof(obj, 0)
        if n:
            seen: set[int] = set()
            sizes = []
            for x in _last(obj, SAMPLE):  # the latest items, as deep as the budget allows
                if sizes and len(seen) >= BUDGET:
                    break
                sizes.append(_item_bytes(x, 0, seen))
            per = sum(sizes) / max(len(sizes), 1)
            total += int(per * (2 * n if isinstance(obj, dict) else n))
        return total
    except Exception:  # noqa: BLE001 - an odd container (a __len__ or __sizeof__ that raises)
        return None


def last_item_type(obj: Any) -> str | None:
    """The type name of the last item of a list, tuple or deque, or of the last value of a
    dict (what the latest step added); None for an empty or other container.

    Example:
        >>> last_item_type([1, 2.5]), last_item_type({"a": (1,)}), last_item_type(set())
        ('float', 'tuple', None)
    """
    try:
        if isinstance(obj, dict):
            return type(next(reversed(obj.values()))).__name__ if obj else None
        if isinstance(obj, (list, tuple, deque)):
            return type(obj[-1]).__name__ if obj else None
    except Exception:  # noqa: BLE001 - an odd container
        return None
    return None
