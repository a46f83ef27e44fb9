"""An ``lru_cache`` that keeps what it was called with: where it is declared, what to do.

A ``functools.lru_cache`` keeps every call's arguments (the cache key) and result until
the entry is evicted, and an unbounded one (``maxsize=None``, ``functools.cache``) never
evicts. Around a method, the key includes ``self``: every instance called through it
stays alive in a cache that belongs to the class, with its results, after the script
has dropped it (a model built, used and deleted in turn). The walks reach the cache
through the class (:mod:`torchmem.doctor.class_walk`) or the variable that holds the
wrapper, and open it with ``gc.get_referents`` (:mod:`torchmem.doctor.internals`).

At a snapshot, :func:`cache_origin` records what the wrapper tells without calling the
function it wraps: the wrapped function's qualified name, file and first line (its first
decorator, where ``@lru_cache`` is written) and ``cache_info()``'s maxsize and entries.
When a finding's culprit is such a wrapper, :func:`cache_finding` names the line of the
decorator when no statement of the script binds the wrapper, says what the cache keeps,
and gives advice (never an edit: no one-statement change is valid for every caller).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from torchmem.model.findings import Finding

__all__ = ["cache_origin", "cache_finding"]

_LRU_WRAPPER = type(functools.lru_cache(maxsize=None)(len))


def cache_origin(obj: Any) -> tuple[str, str, int, int | None, int] | None:
    """(wrapped function's qualified name, its file, the line of its ``lru_cache``
    decorator, maxsize, entries) for an ``lru_cache`` wrapper; None for anything else.
    The line is the decorator that names a cache among the function's decorators
    (``@lru_cache`` under ``@property``), else its first line.

    Example:
        >>> @functools.lru_cache(maxsize=8)
        ... def square(x):
        ...     return x * x
        >>> _ = square(3)
        >>> origin = cache_origin(square)
        >>> origin[0], origin[3:]
        ('square', (8, 1))
    """
    if type(obj) is not _LRU_WRAPPER:
        return None
    wrapped = vars(obj).get("__wrapped__")  # set by update_wrapper: no attribute lookup
    code = getattr(wrapped, "__code__", None)
    if code is None:
        return None
    try:
        info = _LRU_WRAPPER.cache_info(obj)  # the C method, not a replacement in __dict__
        maxsize, entries = info.maxsize, int(info.currsize)
    except Exception:  # noqa: BLE001 - an odd wrapper: no origin
        return None
    name = getattr(wrapped, "__qualname__", None) or getattr(wrapped, "__name__", "?")
    return str(name), code.co_filename, _decorator_line(code), maxsize, entries


def _decorator_line(code: Any) -> int:
    """The line of the decorator of ``code``'s function that names a cache, else its
    first line (the first decorator)."""
    import linecache

    first = int(code.co_firstlineno)
    for line in range(first, first + 20):
        text = linecache.getline(code.co_filename, line).strip()
        if not text.startswith("@"):
            break
        if "cache" in text.split("(", 1)[0].lower():
            return line
    return first


def _is_method(qualname: str) -> bool:
    parts = qualname.split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def _source_line(file: str, line: int) -> str | None:
    import linecache

    text = linecache.getline(file, line).strip()
    return text or None


def cache_finding(finding: Finding, cache: tuple[str, str, int, int | None, int] | None) -> Finding:
    """``finding`` with its culprit's line, evidence and fix saying what an ``lru_cache``
    keeps, when ``cache`` (:attr:`PathStats.cache` of the culprit) is set; else as it is."""
    if cache is None or finding.culprit is None:
        return finding
    qualname, file, line, maxsize, entries = cache
    culprit = finding.culprit
    if culprit.line is None:  # no statement binds it: the decorator is where it is made
        culprit = dataclasses.replace(culprit, file=file, line=line,
                                      code=_source_line(file, line) or culprit.code)
    name = culprit.name
    handle = name.rsplit(":", 1)[1] if ":" in name else name
    bound = ("unbounded (`maxsize=None`)" if maxsize is None
             else f"{entries} of at most {maxsize} entries")
    method = _is_method(qualname)
    kept = ("the arguments of each call, `self` included, and its result: every instance "
            "called through it stays alive, with what it returned, after the script drops it"
            if method else "the arguments of each call and its result until the entry is evicted")
    evidence = (f"`{name}` is the `functools.lru_cache` around `{qualname}` (line {line} of "
                f"{os.path.basename(file)}), {bound}: it keeps {kept}",)
    if method:
        fix = (f"do not cache `{qualname}` on the class keyed on `self`: keep one cache per "
               f"instance (a dict in the instance, dropped with it), or cache a function of the "
               f"other arguments only; at least call `{handle}.cache_clear()` when an instance "
               f"is dropped")
    else:
        fix = (f"bound the cache (`maxsize=`) or cache something smaller than tensors, and call "
               f"`{handle}.cache_clear()` when its entries are no longer needed")
    return dataclasses.replace(finding, culprit=culprit, evidence=evidence + finding.evidence,
                               fix=fix, fix_kind="advice", edit=None, alternatives=())
