"""Find storages that live views keep allocated while addressing only a small part.

``y = x[0, :]; del x`` keeps all of ``x``'s storage alive. Worse, torch keeps the
*base tensor* ``x`` itself alive for ``y`` (``y._base``), so a gc scan still sees a
full-size tensor on that storage. This module therefore treats a full-size tensor as
absent when it is only the base of live views and nothing in Python refers to it (one
:func:`gc.get_referrers` pass over the candidates, only when there are any).

Cost: O(tensors on shared storages) Python work, plus one gc pass over all objects
when a candidate base tensor has to be checked for referrers.
"""

from __future__ import annotations

import gc
from typing import Any, Iterable

from torch import Tensor

from torchmem.collect.storage import used_bytes

__all__ = ["find_pinned"]

_OWN_DIR = __file__.rsplit("collect", 1)[0]  # frames of torchmem itself are not referrers


def _unreferenced(bases: list[Tensor], internal: Iterable[Any]) -> set[int]:
    """ids of ``bases`` that nothing outside torchmem's own frames and lists refers to."""
    if not bases:
        return set()
    skip = {id(o) for o in internal}
    skip.add(id(bases))
    wanted = {id(b) for b in bases}
    held: set[int] = set()
    referrers = gc.get_referrers(*bases)
    try:
        for r in referrers:
            if id(r) in skip or r is referrers:
                continue
            code = getattr(r, "f_code", None)
            if code is not None and code.co_filename.startswith(_OWN_DIR):
                continue  # a frame of torchmem itself
            for o in gc.get_referents(r):
                if id(o) in wanted:
                    held.add(id(o))
    finally:
        del referrers
    return wanted - held


def find_pinned(
    groups: dict[int, list[Tensor]],
    storage_bytes: dict[int, int],
    ratio: float,
    min_bytes: int,
    internal: Iterable[Any] = (),
) -> list[tuple[int, int, Tensor]]:
    """Storages whose live, referenced views address at most ``ratio`` of them.

    Args:
        groups: storage key -> every live tensor seen on that storage.
        storage_bytes: storage key -> bytes of the storage.
        ratio: largest fraction of the storage the views may address.
        min_bytes: least number of unaddressed bytes worth reporting.
        internal: torchmem's own containers that hold these tensors (not referrers).

    Returns:
        ``(key, used_bytes, largest view)`` per pinned storage. Holds tensors: the
        caller turns them into plain data and drops them.
    """
    found: list[tuple[int, int, Tensor]] = []
    suspects: dict[int, list[Tensor]] = {}  # key -> full-size tensors that are view bases only
    for key, ts in groups.items():
        whole = storage_bytes[key]
        limit = whole * ratio
        full = [t for t in ts if used_bytes(t) > limit]
        if not full:
            best = max(ts, key=used_bytes)
            used = used_bytes(best)
            if whole - used >= min_bytes:
                found.append((key, used, best))
            continue
        base_ids = {id(b) for b in (t._base for t in ts) if b is not None}
        if all(id(f) in base_ids for f in full) and len(full) < len(ts):
            suspects[key] = full
    if suspects:
        bases = [b for full in suspects.values() for b in full]
        orphans = _unreferenced(bases, [*internal, *groups.values(), *suspects.values()])
        del bases
        for key, full in suspects.items():
            if all(id(f) in orphans for f in full):
                full_ids = {id(f) for f in full}
                rest = [t for t in groups[key] if id(t) not in full_ids]
                best = max(rest, key=used_bytes)
                used = used_bytes(best)
                if storage_bytes[key] - used >= min_bytes:
                    found.append((key, used, best))
    return found
