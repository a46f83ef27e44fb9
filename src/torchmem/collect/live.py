"""Find every live tensor: the gc-visible ones and those only autograd still holds.

A tensor is *live* when something can still reach its storage. Python code reaches most
of them, and :func:`gc.get_objects` lists those. Two kinds hide from it: gradients that
exist only in C++ (``param.grad`` before Python ever touched it) and tensors saved for
backward by a pending autograd graph. This module finds both: it reads ``.grad`` of
parameters and leaf tensors that require grad, and walks the ``grad_fn`` graph of every
live tensor that requires grad (:mod:`torchmem.collect.graph`).

Exact live tensor bytes on CPU are the sum of the unique storages' ``nbytes`` over all of
them: :func:`live_tensor_bytes`.

Cost: one :func:`gc.get_objects` call (proportional to *all* gc-tracked objects, O),
then a handful of C-level passes over the T tensors found (type filter, storage id,
``requires_grad``, device), each ~60-150 ns per tensor, plus a graph walk of ~2-5 us per
node of pending graphs. Nothing is kept after a call returns. See ``benchmarks/census.py``.

Known limitations:
    * Tensors held only by C++ objects other than autograd graphs and ``.grad`` (e.g. a
      TorchScript module's attributes, CUDA graphs' static tensors, a DataLoader
      worker's shared memory before it reaches Python) are invisible.
    * A graph held only through a ``grad_fn`` object, with none of its output tensors
      alive, is not walked.
    * Saved tensors packed by ``saved_tensors_hooks`` are counted as what the unpack hook
      returns, and the hook runs; saved tensors that an in-place op invalidated cannot be
      read and are not counted.
    * Fake and meta tensors own no memory and are skipped; sparse COO/CSR tensors are
      reported through their component tensors (indices and values).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, Iterator

import torch
from torch import Tensor

from torchmem.collect.graph import iter_nodes, saved_tensors, storage_key

__all__ = ["iter_live_tensors", "live_tensor_bytes", "tensor_types", "LiveScan", "scan"]

_storage_id = getattr(torch._C, "_storage_id", None)
_untyped_storage = Tensor.untyped_storage
_requires_grad = Tensor.requires_grad.__get__  # type: ignore[attr-defined]
_grad_fn = Tensor.grad_fn.__get__  # type: ignore[attr-defined]
_grad = Tensor.grad.__get__  # type: ignore[attr-defined]
_storage_nbytes = torch._C.StorageBase.nbytes
_storage_device = torch._C.StorageBase.device.__get__  # type: ignore[attr-defined]

#: classes whose instances own no memory of their own (tracing/compile-time tensors)
_NO_MEMORY_NAMES = frozenset({"FakeTensor", "FunctionalTensor", "FakeTensorWithNoData"})


def tensor_types() -> tuple[frozenset[type], frozenset[type]]:
    """All classes of live tensors, split into (plain, special).

    ``plain`` holds ``torch.Tensor``, ``nn.Parameter`` and ``nn.Buffer``: their storage
    can be read with batched C-level calls. ``special`` holds every other subclass
    (found through ``__subclasses__`` each call, so classes defined later are seen),
    except tensors that own no memory (fake/functional tensors).
    """
    plain: set[type] = {Tensor, torch.nn.Parameter}
    buffer_cls = getattr(torch.nn, "Buffer", None)
    if isinstance(buffer_cls, type):
        plain.add(buffer_cls)
    special: set[type] = set()
    stack: list[type] = [Tensor]
    while stack:
        cls = stack.pop()
        for sub in type.__subclasses__(cls):
            if sub in plain or sub in special:
                continue
            stack.append(sub)
            if not any(c.__name__ in _NO_MEMORY_NAMES for c in sub.__mro__):
                special.add(sub)
    return frozenset(plain), frozenset(special)


def _sparse_parts(t: Tensor) -> list[Tensor]:
    """Component tensors (which do have storages) of a sparse tensor."""
    layout = t.layout
    try:
        if layout == torch.sparse_coo:
            return [t._indices(), t._values()]
        if layout in (torch.sparse_csr, torch.sparse_bsr):
            return [t.crow_indices(), t.col_indices(), t.values()]
        if layout in (torch.sparse_csc, torch.sparse_bsc):
            return [t.ccol_indices(), t.row_indices(), t.values()]
    except (RuntimeError, NotImplementedError):
        pass
    return []


def _keys(tensors: list[Tensor]) -> list[int | None]:
    """Storage keys of ``tensors`` (same values as :func:`graph.storage_key`)."""
    if _storage_id is not None:
        try:
            return list(map(_storage_id, tensors))
        except Exception:  # noqa: BLE001 - one odd tensor: fall back to the careful path
            pass
    return [storage_key(t) for t in tensors]


@dataclass
class LiveScan:
    """Everything one scan found. Short-lived: it holds tensors, so drop it quickly.

    Attributes:
        tensors: gc-visible tensors that have a storage (views included, not deduplicated).
        keys: storage key of each entry in ``tensors`` (same order).
        grads: gradients (``.grad``) of parameters and leaf tensors that require grad.
        grad_owners: for each gradient, the tensor whose ``.grad`` it is.
        saved: tensors saved for backward by the pending graphs of live tensors.
        graph_leaves: leaf tensors that graphs accumulate into (``AccumulateGrad``).
        graph_nodes: number of distinct autograd nodes walked.
    """

    tensors: list[Tensor] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    grads: list[Tensor] = field(default_factory=list)
    grad_owners: list[Tensor] = field(default_factory=list)
    saved: list[Tensor] = field(default_factory=list)
    graph_leaves: list[Tensor] = field(default_factory=list)
    graph_nodes: int = 0

    def extra(self) -> Iterator[Tensor]:
        """Tensors found outside the gc scan: gradients, saved tensors, graph leaves."""
        yield from self.grads
        yield from self.saved
        yield from self.graph_leaves


def _gc_tensors(
    plain: frozenset[type], special: frozenset[type], gc_collect: bool
) -> tuple[list[Tensor], list[Tensor]]:
    """(plain-class tensors, other-class tensors) among gc-tracked objects."""
    if gc_collect:
        gc.collect()
    objs = gc.get_objects()
    try:
        kinds = list(map(type, objs))
        found = list(compress(objs, map(plain.__contains__, kinds)))
        odd = list(compress(objs, map(special.__contains__, kinds))) if special else []
    finally:
        del objs
    return found, odd


def scan(*, include_graphs: bool = True, gc_collect: bool = False) -> LiveScan:
    """Find the live tensors once (see the module docstring for what is found).

    Args:
        include_graphs: also walk the autograd graphs of live tensors for saved tensors.
        gc_collect: run :func:`gc.collect` first, so unreachable cycles are not counted.

    Returns:
        A :class:`LiveScan`. It holds tensors: use it and drop it before returning to
        user code.
    """
    plain, special = tensor_types()
    found, odd = _gc_tensors(plain, special, gc_collect)
    result = LiveScan()
    keys = _keys(found)
    if None in keys:  # sparse and other storage-less plain tensors
        odd.extend(t for t, k in zip(found, keys) if k is None)
        pairs = [(t, k) for t, k in zip(found, keys) if k is not None]
        found = [t for t, _ in pairs]
        keys = [k for _, k in pairs]
        del pairs
    result.tensors = found
    result.keys = keys  # type: ignore[assignment]
    for t in odd:
        for part in (_sparse_parts(t) if t.layout != torch.strided else [t]):
            key = storage_key(part)
            if key is not None:
                result.tensors.append(part)
                result.keys.append(key)
    del odd

    needs_grad = list(compress(result.tensors, map(_requires_grad, result.tensors)))
    roots: dict[int, Any] = {}
    for t in needs_grad:
        fn = _grad_fn(t)
        if fn is not None:
            roots.setdefault(id(fn), fn)
            continue
        g = _grad(t)
        if g is not None:
            result.grads.append(g)
            result.grad_owners.append(t)
    # parameters frozen after training may keep a stale .grad without requires_grad
    param_types = {c for c in (*plain, *special) if issubclass(c, torch.nn.Parameter)}
    for t in compress(result.tensors, map(param_types.__contains__, map(type, result.tensors))):
        if not _requires_grad(t):
            g = _grad(t)
            if g is not None:
                result.grads.append(g)
                result.grad_owners.append(t)
    del needs_grad
    if include_graphs and roots:
        _walk_graphs(list(roots.values()), result)
    return result


def _walk_graphs(roots: list[Any], result: LiveScan) -> None:
    for node in iter_nodes(roots):
        result.graph_nodes += 1
        variable = getattr(node, "variable", None)
        if isinstance(variable, Tensor):
            result.graph_leaves.append(variable)
            continue
        result.saved.extend(saved_tensors(node))


def iter_live_tensors(include_graphs: bool = True, gc_collect: bool = False) -> Iterator[Tensor]:
    """Yield every live tensor that has a storage.

    Yields the gc-visible tensors (views included), the gradients that exist only in
    C++, and, with ``include_graphs``, the tensors saved for backward by pending graphs
    and the leaves those graphs hold. One storage may be yielded several times (views,
    a saved tensor that is also a variable): deduplicate with
    :func:`torchmem.collect.graph.storage_key`. Sparse tensors are yielded as their
    component tensors.

    Args:
        include_graphs: walk ``grad_fn`` graphs of live tensors for saved tensors.
        gc_collect: run :func:`gc.collect` before scanning.

    Yields:
        Tensors. Do not keep them: a tool that holds them changes what it measures.

    Example:
        >>> from torchmem.collect.live import iter_live_tensors
        >>> n = sum(1 for _ in iter_live_tensors())
    """
    found = scan(include_graphs=include_graphs, gc_collect=gc_collect)
    try:
        for t in found.tensors:
            if not t.is_meta:
                yield t
        yield from found.extra()
    finally:
        del found


def live_tensor_bytes(include_graphs: bool = True, gc_collect: bool = False) -> dict[str, int]:
    """Bytes of all live tensor storages, each storage counted once, by device.

    This is the exact figure of live tensor memory: on CPU, where no caching allocator
    reports it, it is *the* measure; on CUDA it is ``memory_allocated()`` minus
    allocator rounding and memory not owned by tensors (cuBLAS workspaces...).

    Args:
        include_graphs: count tensors only autograd holds (saved for backward).
        gc_collect: run :func:`gc.collect` first.

    Returns:
        ``{"cpu": 4096, "cuda:0": 1048576}``; devices without live tensors are absent.

    Example:
        >>> import torch
        >>> from torchmem.collect.live import live_tensor_bytes
        >>> x = torch.zeros(1024, dtype=torch.float32)
        >>> live_tensor_bytes()["cpu"] >= 4096
        True
    """
    found = scan(include_graphs=include_graphs, gc_collect=gc_collect)
    try:
        first: dict[int, Tensor] = dict(zip(found.keys, found.tensors))
        for t in found.extra():
            key = storage_key(t)
            if key is not None and key not in first:
                first[key] = t
        del found
        storages = list(map(_untyped_storage, first.values()))
        first.clear()
        out: dict[str, int] = {}
        by_device: dict[Any, int] = {}
        for dev, nbytes in zip(map(_storage_device, storages), map(_storage_nbytes, storages)):
            by_device[dev] = by_device.get(dev, 0) + nbytes
        del storages
        return {str(dev): n for dev, n in by_device.items() if dev.type != "meta"}
    finally:
        found = None  # type: ignore[assignment]
