"""Bucket gc objects by their exact class: the pass every census starts with.

:data:`classify` is ``torchmem._gcscan.classify`` (C, a few ns an object) where torchmem
was built with a compiler, else :func:`classify_py`, the same pass in Python.
"""

from __future__ import annotations

from collections import Counter
from itertools import compress, repeat
from operator import is_, not_
from typing import Any, Callable

__all__ = ["classify", "classify_py"]


def classify_py(objects: list[Any], codes: dict[type, int], n: int) -> list[list[Any]]:
    """Pure-Python twin of ``torchmem._gcscan.classify``: ``objects`` bucketed by the
    bucket index ``codes`` gives their exact class (objects of other classes dropped).

    Three C-level passes over ``objects``; then the candidates of the most common class
    (plain tensors, in a census) go to their bucket in one pass, and the others (few:
    parameters, modules, optimizers) one by one.
    """
    out: list[list[Any]] = [[] for _ in range(n)]
    kinds = list(map(type, objects))
    keep = list(map(codes.__contains__, kinds))
    cand = list(compress(objects, keep))
    ckinds = list(compress(kinds, keep))
    del kinds, keep
    if not cand:
        return out

    def bucket(cls: type) -> list[Any]:
        k = codes[cls]
        if not 0 <= k < n:
            raise ValueError(f"classify: bucket {k} is not in range({n})")
        return out[k]

    top = Counter(ckinds[:: max(len(ckinds) // 512, 1)]).most_common(1)[0][0]  # a sample
    is_top = list(map(is_, ckinds, repeat(top)))
    bucket(top).extend(compress(cand, is_top))
    other = list(map(not_, is_top))
    for obj, cls in zip(compress(cand, other), compress(ckinds, other)):
        bucket(cls).append(obj)
    return out


def _load_classify() -> Callable[[list[Any], dict[type, int], int], list[list[Any]]]:
    try:
        from torchmem._gcscan import classify
    except ImportError:  # built without a C compiler: the same pass in Python
        return classify_py
    return classify  # type: ignore[no-any-return]


#: the class-bucketing pass over gc objects (C where torchmem was built with it)
classify = _load_classify()
