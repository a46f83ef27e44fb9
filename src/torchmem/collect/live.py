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
from itertools import compress, repeat
from operator import attrgetter, is_, methodcaller, not_
from typing import Any, Callable, Iterator

import torch
from torch import Tensor

from torchmem.collect.graph import iter_nodes, saved_tensors, storage_key

__all__ = ["iter_live_tensors", "live_tensor_bytes", "tensor_types", "LiveScan", "scan"]



def _getter(owner: type, name: str) -> Callable[[Any], Any]:
    """The C getter of attribute ``name`` (skips attribute lookup in ``map``), or an
    ``attrgetter`` where this torch build defines it elsewhere."""
    for cls in owner.__mro__:
        desc = cls.__dict__.get(name)
        if desc is not None and type(desc).__name__ == "getset_descriptor":
            return desc.__get__  # type: ignore[no-any-return]
    return attrgetter(name)


def _method(owner: type, name: str) -> Callable[[Any], Any]:
    for cls in owner.__mro__:
        desc = cls.__dict__.get(name)
        if desc is not None and type(desc).__name__ == "method_descriptor":
            return desc  # type: ignore[no-any-return]
    return methodcaller(name)


_StorageBase: type = getattr(torch._C, "StorageBase", torch.UntypedStorage)
_untyped_storage = _method(Tensor, "untyped_storage")
_requires_grad = _getter(Tensor, "requires_grad")
_grad_fn = _getter(Tensor, "grad_fn")
_grad = _getter(Tensor, "grad")
_layout = _getter(Tensor, "layout")
_is_cpu = _getter(Tensor, "is_cpu")
_storage_nbytes = _method(_StorageBase, "nbytes")
_storage_device = _getter(_StorageBase, "device")
_storage_cdata = _getter(_StorageBase, "_cdata")

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


def _storages(tensors: list[Tensor]) -> tuple[list[Tensor], list[Any], list[Tensor]]:
    """(tensors with a storage, their untyped storages, tensors without one).

    One C-level ``map`` in the common case; sparse and other storage-less tensors make
    it raise, and then the tensors are split by layout (and, failing that, one by one).
    """
    try:
        return tensors, list(map(_untyped_storage, tensors)), []
    except Exception:  # noqa: BLE001 - a sparse or exotic tensor among them
        pass
    strided = list(map(is_, map(_layout, tensors), repeat(torch.strided)))  # singletons
    dense = list(compress(tensors, strided))
    rest = list(compress(tensors, map(not_, strided)))
    try:
        return dense, list(map(_untyped_storage, dense)), rest
    except Exception:  # noqa: BLE001
        pass
    ok: list[Tensor] = []
    storages: list[Any] = []
    for t in dense:
        try:
            s = _untyped_storage(t)
        except Exception:  # noqa: BLE001 - no storage: skip it
            rest.append(t)
            continue
        ok.append(t)
        storages.append(s)
    return ok, storages, rest


@dataclass
class LiveScan:
    """Everything one scan found. Short-lived: it holds tensors, so drop it quickly.

    Attributes:
        tensors: gc-visible tensors that have a storage (views included, not deduplicated).
        storages: untyped storage of each entry in ``tensors`` (same order).
        keys: storage key of each entry in ``tensors`` (same order).
        grads: gradients (``.grad``) of parameters and leaf tensors that require grad.
        grad_owners: for each gradient, the tensor whose ``.grad`` it is.
        saved: tensors saved for backward by the pending graphs of live tensors.
        saved_by: for each saved tensor, the class name of the node that saved it.
        graph_leaves: leaf tensors that graphs accumulate into (``AccumulateGrad``).
        graph_nodes: number of distinct autograd nodes walked.
        owners: gc-tracked objects of the ``owner_types`` passed to :func:`scan`.
    """

    tensors: list[Tensor] = field(default_factory=list)
    storages: list[Any] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    grads: list[Tensor] = field(default_factory=list)
    grad_owners: list[Tensor] = field(default_factory=list)
    saved: list[Tensor] = field(default_factory=list)
    saved_by: list[str] = field(default_factory=list)
    graph_leaves: list[Tensor] = field(default_factory=list)
    graph_nodes: int = 0
    owners: list[Any] = field(default_factory=list)

    def extra(self) -> Iterator[Tensor]:
        """Tensors found outside the gc scan: gradients, saved tensors, graph leaves."""
        yield from self.grads
        yield from self.saved
        yield from self.graph_leaves


def _gc_tensors(
    plain: frozenset[type],
    special: frozenset[type],
    owners: frozenset[type],
    gc_collect: bool,
    with_params: bool = True,
) -> tuple[list[Tensor], list[Tensor], list[Any], list[Tensor]]:
    """(plain-class tensors, other-class tensors, owners, parameters) among gc objects.

    One C-level pass over all gc-tracked objects keeps the candidates; the split
    passes run over the candidates only, and only for the kinds present.
    """
    if gc_collect:
        gc.collect()
    wanted = plain | special | owners
    objs = gc.get_objects()
    try:
        cand = list(compress(objs, map(wanted.__contains__, map(type, objs))))
    finally:
        del objs
    is_plain = list(map(plain.__contains__, map(type, cand)))
    found = list(compress(cand, is_plain))
    odd: list[Tensor] = []
    others: list[Any] = []
    if len(found) < len(cand):  # owners and tensor subclasses: few, split in Python
        for obj in compress(cand, map(not_, is_plain)):
            (others if type(obj) in owners else odd).append(obj)
    params: list[Tensor] = []
    if with_params:
        kinds = {torch.nn.Parameter}.union(c for c in special if issubclass(c, torch.nn.Parameter))
        params = list(compress(cand, map(kinds.__contains__, map(type, cand))))
    del cand, is_plain
    return found, odd, others, params


def scan(
    *,
    include_graphs: bool = True,
    gc_collect: bool = False,
    owner_types: frozenset[type] = frozenset(),
    frozen_grads: bool = True,
) -> LiveScan:
    """Find the live tensors once (see the module docstring for what is found).

    Args:
        include_graphs: also walk the autograd graphs of live tensors for saved tensors.
        gc_collect: run :func:`gc.collect` first, so unreachable cycles are not counted.
        owner_types: also collect the gc-tracked objects of exactly these classes
            (e.g. module and optimizer classes) into ``owners``, in the same pass.
        frozen_grads: also read ``.grad`` of parameters that no longer require grad
            (one more pass over the tensors; callers that read the parameters' gradients
            through their modules can skip it).

    Returns:
        A :class:`LiveScan`. It holds tensors: use it and drop it before returning to
        user code.
    """
    plain, special = tensor_types()
    found, odd, owners, params = _gc_tensors(plain, special, owner_types, gc_collect, frozen_grads)
    result = LiveScan(owners=owners)
    found, storages, no_storage = _storages(found)
    odd.extend(no_storage)
    for t in odd:
        for part in (_sparse_parts(t) if t.layout != torch.strided else [t]):
            try:
                storage = _untyped_storage(part)
            except Exception:  # noqa: BLE001 - wrapper subclasses without a storage
                continue
            found.append(part)
            storages.append(storage)
    del odd, no_storage
    result.tensors = found
    result.storages = storages
    result.keys = list(map(_storage_cdata, storages))

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
    for t in params:
        if not _requires_grad(t):
            g = _grad(t)
            if g is not None:
                result.grads.append(g)
                result.grad_owners.append(t)
    del needs_grad, params
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
        saved = saved_tensors(node)
        if saved:
            result.saved.extend(saved)
            result.saved_by.extend([type(node).__name__] * len(saved))


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
    first: dict[int, Any] = dict(zip(found.keys, found.storages))
    for t in found.extra():
        key = storage_key(t)
        if key is not None and key not in first:
            first[key] = _untyped_storage(t)
    t = None
    del found
    storages = list(first.values())
    first.clear()
    sizes = list(map(_storage_nbytes, storages))
    devices = list(map(_storage_device, storages))
    del storages
    kinds = set(devices)
    if len(kinds) == 1:
        totals = {kinds.pop(): sum(sizes)}
    else:
        totals = {dev: sum(compress(sizes, map(dev.__eq__, devices))) for dev in kinds}
    return {str(dev): n for dev, n in totals.items() if dev.type != "meta"}
