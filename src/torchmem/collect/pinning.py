"""Find storages that live views keep allocated while addressing only a small part.

``y = x[0, :]; del x`` keeps all of ``x``'s storage alive. Worse, torch keeps the
*base tensor* ``x`` itself alive for ``y`` (``y._base``, its Python object preserved), so
a gc scan still sees a full-size tensor on that storage. A full-size tensor therefore
does not clear a storage when it is only the base of live views and no Python code
refers to it any more. That is decided from reference counts, calibrated against a
probe base made the same way at the same moment, after every reference torchmem held
has been dropped (running frames are not gc objects, so ``gc.get_referrers`` cannot
see a function's local variables; reference counts can).

Cost: Python work proportional to the tensors on the storages checked (those at least
``pin_min_bytes`` large), one ``sys.getrefcount`` per suspect base tensor.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import torch
from torch import Tensor

from torchmem.collect.storage import dtype_name, used_bytes

__all__ = ["PinCheck", "find_pinned", "resolve"]

#: (storage key, bytes the largest live view addresses, its shape, its dtype)
Pin = tuple[int, int, tuple[int, ...], str]


@dataclass
class PinCheck:
    """First-phase result. ``bases`` holds tensors: hand it to :func:`resolve` once
    every other reference is gone, and do not keep it."""

    direct: list[Pin] = field(default_factory=list)
    pending: dict[int, Pin] = field(default_factory=dict)
    bases: list[Tensor] = field(default_factory=list)
    base_keys: list[int] = field(default_factory=list)


def _largest(ts: list[Tensor]) -> tuple[int, tuple[int, ...], str]:
    best = max(ts, key=used_bytes)
    return used_bytes(best), tuple(best.shape), dtype_name(best.dtype)


def find_pinned(
    groups: dict[int, list[Tensor]],
    storage_bytes: dict[int, int],
    ratio: float,
    min_bytes: int,
    owned: set[int] | frozenset[int] = frozenset(),
) -> PinCheck:
    """Storages whose live views address at most ``ratio`` of them (first phase).

    Args:
        groups: storage key -> every live tensor seen on that storage.
        storage_bytes: storage key -> bytes of the storage.
        ratio: largest fraction of the storage the views may address.
        min_bytes: least number of unaddressed bytes worth reporting.
        owned: storage keys with an owner role; their full-size tensors are held by
            that owner (module, optimizer, autograd graph), never only by views.

    Returns:
        A :class:`PinCheck`: storages pinned for sure, and those pinned only if their
        full-size base tensors turn out to be unreferenced (see :func:`resolve`).
    """
    check = PinCheck()
    for key, ts in groups.items():
        whole = storage_bytes[key]
        limit = whole * ratio
        full = [t for t in ts if used_bytes(t) > limit]
        if not full:
            used, shape, dtype = _largest(ts)
            if whole - used >= min_bytes:
                check.direct.append((key, used, shape, dtype))
            continue
        if key in owned or len(full) == len(ts):
            continue
        base_ids = {id(b) for b in (t._base for t in ts) if b is not None}
        if all(id(f) in base_ids for f in full):
            full_ids = {id(f) for f in full}
            used, shape, dtype = _largest([t for t in ts if id(t) not in full_ids])
            if whole - used >= min_bytes:
                check.pending[key] = (key, used, shape, dtype)
                check.bases.extend(full)
                check.base_keys.extend([key] * len(full))
    return check


def _probe() -> Tensor:
    base = torch.empty(1)
    view = base[:]
    del base
    return view


def resolve(check: PinCheck) -> list[Pin]:
    """Second phase: keep the pending storages whose bases nothing refers to.

    Call it only after dropping every other reference to the tensors of the census
    (the reference counts must include nothing of torchmem's but ``check.bases``).
    Empties ``check.bases``.
    """
    pins = list(check.direct)
    if check.bases:
        probe = _probe()
        bases = check.bases
        bases.append(probe._base)  # type: ignore[arg-type]
        counts = list(map(sys.getrefcount, bases))
        bases.clear()
        del probe
        reference = counts.pop()
        held = {k for k, c in zip(check.base_keys, counts) if c > reference}
        pins.extend(p for k, p in check.pending.items() if k not in held)
    check.pending.clear()
    return pins
