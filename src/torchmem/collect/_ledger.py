"""Private: the exact live tensor bytes of a device at a tracker's start, cheaply.

``torchmem.track(exact=True)`` needs the bytes of *every* live storage when its region
begins: the absolute baseline, and the sizes of storages that existed before and are
freed inside (a freed storage's size cannot be read once it is gone). This module keeps
that knowledge in the storage engine (:mod:`torchmem.collect._engine`) as a *ledger*:
one weak reference, with a free callback, per live storage of the device.

* The first exact tracker of a process (and any whose ledger cannot be vouched for)
  takes one full scan of live tensors, as :func:`torchmem.read` ``(exact=True)`` does:
  every gc-visible tensor, the ``.grad`` of leaves, the tensors pending autograd
  graphs saved. Each storage found enters the ledger.
* From then on the ledger stays current by itself: the engine adds what it counts
  inside regions, and the callbacks subtract frees at any time, inside regions or not.
* What it cannot see is storages created *between* regions. Those belong to Python
  objects created since the previous region ended, and CPython keeps new objects in
  its young gc generations (0 and 1) until a collection of generation 1 or 2 promotes
  them. So the next exact tracker lists only those generations (hundreds to a few
  thousand objects, not the whole heap), plus the ``.grad`` of the leaves it knows
  (a backward run outside a region creates gradients no new Python object owns), and
  re-reads the size of every storage it knows (``resize_``). If a generation-1 or -2
  collection ran since the previous region ended, the young generations no longer hold
  every new object and a full scan is taken instead. So is one on Python >= 3.14
  (incremental gc) and free-threaded builds.

Cost: one full scan the first time (tens of ms, like ``read(exact=True)``), then
O(young objects + known storages) per exact tracker (~0.1-1 ms); one weak reference
(~150 bytes) per live storage, and one callback per storage freed, for as long as the
process lives or until :meth:`Engine.forget`.

Known limitations (on top of the census's, :mod:`torchmem.collect.live`):
    * A tensor that existed before the previous region and got a *new* storage between
      regions without being a leaf (``t.data = other``, ``t.set_(...)``) is not seen
      until the next full scan.
    * Storages the engine does not see being created inside a region (other threads'
      ops, ``torch.load``, ``torch.from_numpy``...) are found by the next scan only
      while their Python objects are still young; otherwise at the next full scan.
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

import torch

from torchmem.collect._engine import Engine
from torchmem.collect.graph import iter_nodes, saved_tensors

__all__ = ["sync", "ended", "young_scans"]

_leaves: dict[str, list[weakref.ref[torch.Tensor]]] = {}


def young_scans() -> bool:
    """Whether this interpreter's gc keeps every new object in generations 0 and 1
    until a generation-1 or -2 collection (CPython 3.10-3.13 with the GIL)."""
    gil = getattr(sys, "_is_gil_enabled", None)
    return (
        sys.implementation.name == "cpython"
        and sys.version_info < (3, 14)
        and (gil is None or bool(gil()))
    )


def _counts() -> tuple[int, ...]:
    stats = gc.get_stats()
    return tuple(int(s.get("collections", 0)) for s in stats[1:])


def sync(engine: Engine, dev: str) -> str:
    """Make ``dev``'s ledger complete; return the scan taken: ``"full"`` or ``"young"``.

    Storages found enter the engine's ``live`` count of ``dev``: a caller with trackers
    active shifts their baselines by what was added. Never raises for the user's
    tensors: one that cannot be read is skipped.
    """
    previous = engine._stamp.get(dev)
    young = (
        dev in engine._kept
        and young_scans()
        and previous is not None
        and previous == _counts()
    )
    engine._stamp[dev] = None
    engine._synced.add(dev)
    engine.keep(dev)
    was_enabled = gc.isenabled()
    gc.disable()  # no collection may move objects between the listings
    try:
        if young:
            objects = gc.get_objects(generation=0)
            objects.extend(gc.get_objects(generation=1))
        else:
            objects = gc.get_objects()
        tensors = _tensors_among(objects)
        del objects
    finally:
        if was_enabled:
            gc.enable()
    _register(engine, dev, tensors, _leaves.setdefault(dev, []))
    tensors.clear()
    _recheck(engine, dev)
    return "young" if young else "full"


def ended(engine: Engine, dev: str) -> None:
    """The last tracker of ``dev`` ended: if an exact one synced the ledger since the
    previous quiet period, the ledger is complete now; record the gc counts to vouch
    for it at the next :func:`sync`."""
    with engine._lock:
        if engine._users.get(dev, 0) or dev not in engine._synced:
            return
        engine._synced.discard(dev)
        if dev in engine._kept:
            engine._stamp[dev] = _counts() if young_scans() else None


def _tensors_among(objects: list[Any]) -> list[torch.Tensor]:
    from torchmem.collect.gc_classify import classify
    from torchmem.collect.tensor_classes import tensor_types

    plain, special = tensor_types()
    codes = {c: 0 for c in plain}
    codes.update({c: 1 for c in special})
    buckets = classify(objects, codes, 2)
    found = buckets[0]
    found.extend(buckets[1])
    return found


def _storage(t: torch.Tensor) -> Any:
    try:
        if t.layout != torch.strided or t.is_nested:
            return None
        return t.untyped_storage()
    except Exception:  # noqa: BLE001 - wrapper subclasses without a plain storage
        return None


def _device_type(st: Any, t: torch.Tensor) -> str | None:
    try:
        if type(t) in (torch.Tensor, torch.nn.Parameter):
            return "cpu" if t.is_cpu else str(st.device.type)
        return str(st.device.type)  # FakeTensor says "cpu", its storage is meta
    except Exception:  # noqa: BLE001
        return None


def _add(engine: Engine, dev: str, t: torch.Tensor) -> bool:
    st = _storage(t)
    if st is None or _device_type(st, t) != dev:
        return False
    try:
        return engine.register(st, dev)
    except Exception:  # noqa: BLE001 - a storage that cannot be weakly referenced
        return False


def _register(
    engine: Engine, dev: str, tensors: list[torch.Tensor], leaves: list[weakref.ref[torch.Tensor]]
) -> None:
    from torchmem.collect.tensor_classes import sparse_parts

    roots: dict[int, Any] = {}
    for t in tensors:
        try:
            if t.layout != torch.strided:  # sparse: its component tensors hold storages
                for part in sparse_parts(t):
                    _add(engine, dev, part)
            else:
                _add(engine, dev, t)
            if not t.requires_grad:
                if isinstance(t, torch.nn.Parameter) and t.grad is not None:
                    _add(engine, dev, t.grad)  # frozen after training, stale .grad kept
                continue
            fn = t.grad_fn
        except Exception:  # noqa: BLE001
            continue
        if fn is not None:
            roots.setdefault(id(fn), fn)
        else:
            leaves.append(weakref.ref(t))
    # graphs pending backward hold tensors only C++ references (saved for backward)
    for node in iter_nodes(list(roots.values())):
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            _add(engine, dev, variable)
            leaves.append(weakref.ref(variable))
            continue
        for saved in saved_tensors(node):
            _add(engine, dev, saved)
    roots.clear()
    # gradients of the leaves: accumulated in C++, maybe by a backward outside a region
    alive: list[weakref.ref[torch.Tensor]] = []
    seen: set[int] = set()
    for ref in leaves:
        leaf = ref()
        if leaf is None or id(leaf) in seen:
            continue
        seen.add(id(leaf))
        alive.append(ref)
        _add(engine, dev, leaf)  # a leaf's storage swapped through .data
        try:
            grad = leaf.grad if leaf.is_leaf else None  # non-leaf .grad warns
        except Exception:  # noqa: BLE001
            continue
        if grad is not None:
            _add(engine, dev, grad)
    leaves[:] = alive


def _recheck(engine: Engine, dev: str) -> None:
    """Bring every counted storage's size up to date (``resize_`` outside a region)."""
    for ref in [r for r in list(engine._refs.values()) if r.dev == dev]:
        st = ref()
        if st is not None:
            try:
                n = int(st.nbytes())
            except (RuntimeError, NotImplementedError, TypeError, AttributeError):
                continue
            if n != ref.nbytes:
                engine._resized(ref, n)
