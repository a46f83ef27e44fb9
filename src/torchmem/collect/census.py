"""``torchmem.census()``: every live tensor storage, its bytes and its role.

The census scans live tensors once (:mod:`torchmem.collect.live`: the gc scan, gradients
held in C++, tensors saved by pending autograd graphs), deduplicates them by storage,
classifies each storage (:mod:`torchmem.collect.roles`) and finds views that pin a much
larger storage. It returns a :class:`~torchmem.model.census.Census` of plain data and
holds none of the user's tensors afterwards.

Cost: O(O + T + S + N): one gc listing and class pass over all O gc-tracked objects (a
few ns each with the C pass), about seven C-level passes over the T live tensors (~0.5 us
per tensor in all), a few us for each of the S storages that get Python-level work
(owned by a module, optimizer or graph; listed; at least ``pin_min_bytes`` large) and
2-5 us per autograd node walked (figures from a shared 2-core machine). Per-tensor work
is ``map``/``compress`` over C functions, never a Python loop. Measured by
``benchmarks/census.py`` (see ``docs/census.md``). Memory held during the call: a few
lists of length T.

Known limitations:
    * The live-tensor limits of :mod:`torchmem.collect.live` apply (tensors only C++
      holds, apart from gradients and autograd graphs, are not seen).
    * Pinning views are found from ``numel * element_size`` of each storage's views; an
      ``expand``-ed view (stride 0) of a small slice is not reported as pinning.
    * Module names come from root modules: with several unrelated models alive, names
      are relative to each model and may coincide. Pass ``modules={"a": m1, "b": m2}``.
"""

from __future__ import annotations

import time
from itertools import chain, compress, filterfalse, islice, repeat
from operator import le
from typing import Any, Iterable, Mapping

import torch
from torch import Tensor

from torchmem.collect.graph import storage_key
from torchmem.collect.live import (
    LiveScan,
    Storages,
    _is_cpu,
    _storage_cdata,
    _storage_device,
    _storage_nbytes,
    _untyped_storage,
    scan,
)
from torchmem.collect.pinning import find_pinned, resolve
from torchmem.collect.roles import ACTIVATION, OTHER, collect_owned, owner_types
from torchmem.collect.storage import dtype_name
from torchmem.errors import UsageError
from torchmem.model.census import ROLES, Census, PinningView, StorageEntry, StorageGroup

__all__ = ["census"]

_DEVICE_NAMES: dict[torch.device, str] = {}


def _device_address(storage: Any) -> int | None:
    """The start of a CUDA storage's memory (the allocator block's address), else None."""
    try:
        return int(storage.data_ptr()) if storage.device.type == "cuda" else None
    except (RuntimeError, AttributeError, TypeError):
        return None


def _device_name(dev: torch.device) -> str:
    name = _DEVICE_NAMES.get(dev)
    if name is None:
        name = _DEVICE_NAMES.setdefault(dev, str(dev))
    return name


def census(
    *,
    include_graphs: bool = True,
    modules: Iterable[torch.nn.Module] | Mapping[str, torch.nn.Module] | None = None,
    optimizers: Iterable[torch.optim.Optimizer] | None = None,
    gc_collect: bool = False,
    max_other: int | None = 200,
    pin_ratio: float = 0.5,
    pin_min_bytes: int = 1024,
) -> Census:
    """Take a census of live tensor storages.

    Args:
        include_graphs: walk the ``grad_fn`` graphs of live tensors and count the
            tensors they saved for backward (role ``activation``).
        modules: the modules whose parameters and buffers to name; a mapping
            ``{prefix: module}`` prefixes their names. Default: every ``nn.Module`` the
            gc scan finds (names relative to the outermost modules).
        optimizers: the optimizers whose state to classify. Default: every
            ``torch.optim.Optimizer`` the gc scan finds.
        gc_collect: run :func:`gc.collect` first so unreachable cycles are not counted.
        max_other: list at most this many storages of role ``other`` (the largest);
            ``None`` lists all. Totals always include every storage.
        pin_ratio: report a storage as pinned when its largest live view addresses at
            most this fraction of it...
        pin_min_bytes: ...and leaves at least this many bytes unaddressed.

    Returns:
        A :class:`~torchmem.model.census.Census` (plain data: ints and strings).

    Raises:
        UsageError: ``max_other`` is negative or ``pin_ratio`` is not in (0, 1].

    Example:
        >>> import torch, torchmem
        >>> model = torch.nn.Linear(256, 256)
        >>> c = torchmem.census(modules=[model], optimizers=[])
        >>> c.find("weight").nbytes
        262144
    """
    if max_other is not None and max_other < 0:
        raise UsageError(
            f"torchmem.census: max_other must be >= 0 or None; got {max_other}",
            tip="use max_other=None to list every storage",
        )
    if not 0 < pin_ratio <= 1:
        raise UsageError(
            f"torchmem.census: pin_ratio must be in (0, 1]; got {pin_ratio}",
            tip="0.5 reports storages whose live views use at most half of them",
        )
    t0 = time.perf_counter()
    want_owners = modules is None or optimizers is None
    found = scan(
        include_graphs=include_graphs,
        gc_collect=gc_collect,
        owner_types=owner_types() if want_owners else frozenset(),
        frozen_grads=False,  # collect_owned reads every parameter's .grad
    )
    try:
        return _build(found, modules, optimizers, max_other, pin_ratio, pin_min_bytes, t0)
    finally:
        found.clear()
        del found


def _build(
    found: LiveScan,
    modules: Any,
    optimizers: Any,
    max_other: int | None,
    pin_ratio: float,
    pin_min_bytes: int,
    t0: float,
) -> Census:
    if modules is None:
        modules = [o for o in found.owners if isinstance(o, torch.nn.Module)]
    if optimizers is None:
        optimizers = [o for o in found.owners if isinstance(o, torch.optim.Optimizer)]
    found.owners.clear()
    # distinct storages: one C-level dict build over the gc-visible tensors' storages
    tensors = found.tensors
    unique = Storages(found.storages)
    gc_keys = unique.keys
    n_gc = len(gc_keys)
    owned = collect_owned(modules, optimizers, found.grads, key=unique.key)
    del modules, optimizers
    roles = owned.roles
    t: Any = None
    for t, node in zip(found.saved, found.saved_by):
        if storage_key(t) is not None:
            roles.setdefault(unique.key(_untyped_storage(t)), (ACTIVATION, f"saved by {node}"))

    # tensors found through owners and graphs: on a storage the gc scan saw (maybe the
    # very same Python objects), or on a storage only they reach
    on_gc: list[tuple[Tensor, Any]] = []
    off_gc: list[tuple[Tensor, Any]] = []
    only_extra: set[Any] = set()
    storage: Any = None
    for t in chain(owned.tensors, found.extra()):
        try:
            storage = _untyped_storage(t)
        except Exception:  # noqa: BLE001 - sparse/wrapper tensors: no plain storage
            continue
        key = unique.key(storage)
        if key in unique and key not in only_extra:
            on_gc.append((t, key))
        else:
            unique.add(storage)
            only_extra.add(key)
            off_gc.append((t, key))
    owned.tensors.clear()
    t = storage = None

    keys = unique.all_keys()
    nbytes = list(map(_storage_nbytes, unique.storages()))
    if all(map(_is_cpu, tensors)) and all(_is_cpu(t) for t, _ in chain(on_gc, off_gc)):
        devices: list[Any] = []
        device_set = {torch.device("cpu")}
    else:
        devices = list(map(_storage_device, unique.storages()))
        device_set = set(devices)
        if any(d.type == "meta" for d in device_set):  # meta tensors own no memory
            keep = [d.type != "meta" for d in devices]
            keys, devices, nbytes = (list(compress(c, keep)) for c in (keys, devices, nbytes))
            device_set = {d for d in device_set if d.type != "meta"}
            unique.keep(keys)
    n = len(keys)
    role_of = {k: r for k, (r, _) in roles.items() if k in unique}

    # per-key lookups for the few storages that get Python-level work, memoised
    sizes: dict[Any, int] = {}
    places: dict[Any, Any] = {}
    only_device = next(iter(device_set)) if len(device_set) == 1 else None

    def device_of(key: Any) -> Any:
        if only_device is not None:
            return only_device
        dev = places.get(key)
        if dev is None:
            dev = places[key] = _storage_device(unique.storage(key))
        return dev

    def nbytes_of(key: Any) -> int:
        size = sizes.get(key)
        if size is None:
            size = sizes[key] = int(_storage_nbytes(unique.storage(key)))
        return size

    # the few storages that get Python-level work: owned, listed, large enough to pin
    listed, omitted_n, omitted_b = _select(keys, nbytes, role_of, max_other, nbytes_of)
    large = [keys[i] for i in compress(range(n), map(le, repeat(pin_min_bytes), nbytes))]
    # every live tensor viewing those storages: one C-level pass over the gc-visible
    # tensors, then the tensors found through owners and graphs (each object once)
    need = set(listed).union(large, [k for _, k in on_gc])
    views: dict[Any, list[Tensor]] = {}
    for i in compress(range(n_gc), map(need.__contains__, gc_keys)):
        views.setdefault(gc_keys[i], []).append(tensors[i])
    del need
    extra_new = 0
    for t, key in chain(on_gc, off_gc):
        seen = views.setdefault(key, [])
        if not any(v is t for v in seen):
            seen.append(t)
            extra_new += 1
    on_gc.clear()
    off_gc.clear()

    groups = _groups(nbytes, devices, device_set, role_of, device_of, nbytes_of)
    entries = []
    ts: Any = None
    for key in listed:
        ts = sorted(views[key], key=_view_order)  # largest view first, whatever gc order
        info = roles.get(key)
        entries.append(
            StorageEntry(
                key=int(_storage_cdata(unique.storage(key))),
                nbytes=nbytes_of(key),
                device=_device_name(device_of(key)),
                dtype=dtype_name(ts[0].dtype),
                shapes=tuple(dict.fromkeys([tuple(v.shape) for v in ts])),
                role=ROLES[info[0]] if info else "other",
                name=info[1] if info else None,
                n_tensors=len(ts),
                address=_device_address(unique.storage(key)),
            )
        )
    entries.sort(key=lambda e: (-e.nbytes, ROLES.index(e.role), e.name or "", e.key))

    ts = None
    suspects = {key: views[key] for key in large}
    check = find_pinned(
        suspects, {k: nbytes_of(k) for k in suspects}, pin_ratio, pin_min_bytes, set(role_of)
    )
    # drop every reference to the user's tensors but check.bases, then resolve
    suspects.clear()
    views.clear()
    found.clear()
    pinning = [
        PinningView(
            key=int(_storage_cdata(unique.storage(key))),
            storage_bytes=nbytes_of(key),
            used_bytes=used,
            shape=shape,
            dtype=dtype,
            device=_device_name(device_of(key)),
            role=ROLES[role_of.get(key, OTHER)],
            name=roles[key][1] if key in roles else None,
        )
        for key, used, shape, dtype in resolve(check)
    ]
    pinning.sort(key=lambda p: (-p.wasted_bytes, p.key))

    return Census(
        storages=tuple(entries),
        pinning_views=tuple(pinning),
        groups=groups,
        n_storages=n,
        omitted_storages=omitted_n,
        omitted_bytes=omitted_b,
        tensors_seen=n_gc + extra_new,
        graph_nodes=found.graph_nodes,
        elapsed_s=time.perf_counter() - t0,
    )


def _view_order(t: Tensor) -> tuple[int, tuple[int, ...], str]:
    return (-t.numel(), tuple(t.shape), str(t.dtype))


def _groups(
    nbytes: list[int],
    devices: list[Any],
    device_set: set[Any],
    role_of: dict[int, int],
    device_of: Any,
    nbytes_of: Any,
) -> tuple[StorageGroup, ...]:
    """Exact (storages, bytes) per (role, device): owned storages one by one, the
    ``other`` ones as device totals minus owned (C-level sums)."""
    if not nbytes:
        return ()
    if len(device_set) == 1:
        (dev,) = device_set
        per_dev = {dev: (len(nbytes), sum(nbytes))}
    else:
        per_dev = {}
        for dev in device_set:
            mask = list(map(dev.__eq__, devices))
            per_dev[dev] = (sum(mask), sum(compress(nbytes, mask)))
    cells: dict[tuple[int, Any], list[int]] = {}
    for key, role in role_of.items():
        cell = cells.setdefault((role, device_of(key)), [0, 0])
        cell[0] += 1
        cell[1] += nbytes_of(key)
    for dev, (count, total) in per_dev.items():
        own = [c for (_, d), c in cells.items() if d == dev]
        rest = count - sum(c[0] for c in own)
        if rest:
            cells[(OTHER, dev)] = [rest, total - sum(c[1] for c in own)]
    out = [
        StorageGroup(role=ROLES[r], device=_device_name(d), storages=c, nbytes=b)
        for (r, d), (c, b) in cells.items()
    ]
    out.sort(key=lambda g: (-g.nbytes, ROLES.index(g.role), g.device))
    return tuple(out)


def _select(
    keys: list[int],
    nbytes: list[int],
    role_of: dict[int, int],
    max_other: int | None,
    nbytes_of: Any,
) -> tuple[list[int], int, int]:
    """(keys to list, ``other`` storages left out, their bytes).

    Lists every owned storage and the ``max_other`` largest others, found with one C
    sort of the sizes and a threshold pass, not a Python loop over all storages.
    """
    n = len(keys)
    owned = list(role_of)
    n_other = n - len(owned)
    if max_other is None or n_other <= max_other:
        return owned + list(filterfalse(role_of.__contains__, keys)), 0, 0
    owned_bytes = sum(map(nbytes_of, owned))
    other_bytes = sum(nbytes) - owned_bytes
    if max_other == 0:
        return owned, n_other, other_bytes
    # the (max_other + owned)-th largest size bounds the max_other largest others
    threshold = sorted(nbytes, reverse=True)[min(max_other + len(owned), n) - 1]
    above = compress(range(n), map(threshold.__lt__, nbytes))
    chosen = [i for i in above if keys[i] not in role_of]
    if len(chosen) > max_other:
        chosen = sorted(chosen, key=nbytes.__getitem__, reverse=True)[:max_other]
    else:
        ties = (i for i in compress(range(n), map(threshold.__eq__, nbytes)) if keys[i] not in role_of)
        chosen.extend(islice(ties, max_other - len(chosen)))
    kept = sum(nbytes[i] for i in chosen)
    return owned + [keys[i] for i in chosen], n_other - len(chosen), other_bytes - kept
