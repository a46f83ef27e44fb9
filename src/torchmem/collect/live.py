"""Find every live tensor: the gc-visible ones and those only autograd still holds.

A tensor is *live* when something can still reach its storage. Python code reaches most
of them, and :func:`gc.get_objects` lists those. Two kinds hide from it: gradients that
exist only in C++ (``param.grad`` before Python ever touched it) and tensors saved for
backward by a pending autograd graph. This module finds both: it reads ``.grad`` of
parameters and leaf tensors that require grad, and walks the ``grad_fn`` graph of every
live tensor that requires grad (:mod:`torchmem.collect.graph`).

Exact live tensor bytes on CPU are the sum of the unique storages' ``nbytes`` over all of
them: :func:`live_tensor_bytes`.

Cost: one :func:`gc.get_objects` call and one pass that buckets the objects by exact
class (C in ``torchmem._gcscan`` where it was built, a few ns an object; the same pass in
Python otherwise), then a handful of C-level passes over the T tensors found (storage,
``requires_grad``, device, dedupe, ``nbytes``), each ~60-150 ns per tensor, plus a graph
walk of ~2-5 us per node of pending graphs. Nothing is kept after a call returns, but
torch keeps the Python object of every storage it was asked for as long as the storage
lives (100-115 bytes each, measured by ``benchmarks/census.py``).

Known limitations:
    * Tensors held only by C++ objects other than autograd graphs and ``.grad`` (e.g. a
      TorchScript module's attributes, CUDA graphs' static tensors, a DataLoader
      worker's shared memory before it reaches Python) are invisible.
    * A graph held only through a ``grad_fn`` object, with none of its output tensors
      alive, is not walked.
    * Saved tensors packed by ``saved_tensors_hooks`` are counted as what the unpack hook
      returns, and the hook runs; saved tensors that an in-place op invalidated cannot be
      read and are not counted.
    * Objects frozen by :func:`gc.freeze` are in no gc listing: tensors among them are
      not counted, and a scan warns (``RuntimeWarning``) while any object is frozen.
    * Fake and meta tensors own no memory and are skipped; sparse COO/CSR tensors are
      reported through their component tensors (indices and values).
"""

from __future__ import annotations

import gc
import warnings
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, is_, methodcaller, not_
from typing import Any, Callable, Iterator

import torch
from torch import Tensor

from torchmem.collect.gc_classify import classify, classify_py
from torchmem.collect.graph import iter_nodes, saved_tensors
from torchmem.collect.storages import Storages, storages_are_unique_objects
from torchmem.collect.tensor_classes import sparse_parts, tensor_types

__all__ = [
    "iter_live_tensors",
    "live_tensor_bytes",
    "tensor_types",
    "LiveScan",
    "scan",
    "referrers_list_tensors",
    "storages_are_unique_objects",
    "Storages",
    "classify",
]


def _getter(name: str) -> Callable[[Any], Any]:
    """A C-level reader of attribute ``name``, for ``map``. ``attrgetter`` is about
    twice as fast as the descriptor's ``__get__`` (no argument tuple per call)."""
    return attrgetter(name)


def _method(owner: type, name: str) -> Callable[[Any], Any]:
    for cls in owner.__mro__:
        desc = cls.__dict__.get(name)
        if desc is not None and type(desc).__name__ == "method_descriptor":
            return desc  # type: ignore[no-any-return]
    return methodcaller(name)


_StorageBase: type = getattr(torch._C, "StorageBase", torch.UntypedStorage)
_untyped_storage = _method(Tensor, "untyped_storage")
_requires_grad = _getter("requires_grad")
_grad_fn = _getter("grad_fn")
_grad = _getter("grad")
_layout = _getter("layout")
_is_cpu = _getter("is_cpu")
_storage_nbytes = _method(_StorageBase, "nbytes")
_storage_device = _getter("device")
_storage_cdata = _getter("_cdata")

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


_TRAITS: dict[str, bool] = {}


def referrers_list_tensors() -> bool:
    """Whether ``gc.get_referrers(TensorClass)`` lists *every* live tensor of that class.

    A tensor's ``tp_traverse`` visits its class, so the referrers of the tensor classes
    are the tensors (plus a few dicts and tuples naming the classes). Before torch
    reworked PyObject preservation, ``tp_traverse`` returned early for a tensor that C++
    also held while Python owned it (a leaf saved for backward, a parameter of a pending
    graph). This checks exactly that case once per process.
    """
    ok = _TRAITS.get("referrers")
    if ok is None:
        leaf = torch.ones(1, requires_grad=True)
        out = leaf * leaf  # MulBackward0 saves the leaf; AccumulateGrad holds it too
        ok = _TRAITS["referrers"] = type(leaf) in gc.get_referents(leaf)
        del out, leaf
    return ok


@dataclass
class LiveScan:
    """Everything one scan found. Short-lived: it holds tensors, so drop it quickly.

    Attributes:
        tensors: gc-visible tensors that have a storage (views included, not deduplicated).
        storages: untyped storage of each entry in ``tensors`` (same order); deduplicate
            them with :class:`Storages`.
        grads: gradients (``.grad``) of parameters and leaf tensors that require grad.
        grad_owners: for each gradient, the tensor whose ``.grad`` it is.
        saved: tensors saved for backward by the pending graphs of live tensors.
        saved_by: for each saved tensor, the class name of the node that saved it.
        graph_leaves: leaf tensors that graphs accumulate into (``AccumulateGrad``).
        graph_nodes: number of distinct autograd nodes walked.
        owners: gc-tracked objects of the ``owner_types`` passed to :func:`scan`.
        gc_objects: objects the garbage collector tracked when the scan listed them
            (None when the scan listed the tensors' referrers instead of every object).
    """

    tensors: list[Tensor] = field(default_factory=list)
    storages: list[Any] = field(default_factory=list)
    grads: list[Tensor] = field(default_factory=list)
    grad_owners: list[Tensor] = field(default_factory=list)
    saved: list[Tensor] = field(default_factory=list)
    saved_by: list[str] = field(default_factory=list)
    graph_leaves: list[Tensor] = field(default_factory=list)
    graph_nodes: int = 0
    owners: list[Any] = field(default_factory=list)
    gc_objects: int | None = None

    def extra(self) -> Iterator[Tensor]:
        """Tensors found outside the gc scan: gradients, saved tensors, graph leaves."""
        yield from self.grads
        yield from self.saved
        yield from self.graph_leaves

    def clear(self) -> None:
        """Drop every reference to the user's tensors and objects."""
        for column in (self.tensors, self.storages, self.grads, self.grad_owners,
                       self.saved, self.graph_leaves, self.owners):
            column.clear()


# buckets of :func:`_gc_tensors`
_PLAIN, _PARAM, _SPECIAL, _SPECIAL_PARAM, _OWNER = range(5)


def _gc_tensors(
    plain: frozenset[type],
    special: frozenset[type],
    owners: frozenset[type],
    gc_collect: bool,
    with_params: bool = True,
    via: str | None = None,
) -> tuple[list[Tensor], list[Tensor], list[Any], list[Tensor], int | None]:
    """(plain-class tensors, other-class tensors, owners, parameters, number of gc
    objects listed or None) among gc objects.

    Every gc object is listed and :data:`classify` keeps those of the wanted classes.
    Without the C accelerator and without owners to find, the referrers of the tensor
    classes are listed instead: a C-level traversal that returns little besides the
    tensors (see :func:`referrers_list_tensors`), cheaper than classifying every gc
    object in Python. ``via`` (``"objects"`` or ``"referrers"``) forces one way.
    """
    if gc_collect:
        gc.collect()
    param_kinds = {c for c in plain | special if issubclass(c, torch.nn.Parameter)}
    codes: dict[type, int] = {c: _OWNER for c in owners}
    for c in special:
        codes[c] = _SPECIAL_PARAM if c in param_kinds else _SPECIAL
    for c in plain:
        codes[c] = _PARAM if c in param_kinds else _PLAIN
    if via is None:
        cheaper = not owners and classify is classify_py and referrers_list_tensors()
        via = "referrers" if cheaper else "objects"
    if via == "referrers":
        objs = gc.get_referrers(*plain, *special)
        listed = None
    else:
        objs = gc.get_objects()
        listed = len(objs)
    try:
        buckets = classify(objs, codes, 5)
    finally:
        del objs
    found = buckets[_PLAIN]
    if buckets[_PARAM]:
        found.extend(buckets[_PARAM])
    odd = buckets[_SPECIAL] + buckets[_SPECIAL_PARAM]
    params = buckets[_PARAM] + buckets[_SPECIAL_PARAM] if with_params else []
    owners_found = buckets[_OWNER]
    buckets.clear()
    return found, odd, owners_found, params, listed


def _warn_if_frozen() -> None:
    frozen = gc.get_freeze_count()
    if frozen:
        warnings.warn(
            f"torchmem: {frozen} objects were frozen by gc.freeze(); no gc listing sees "
            "them, so tensors among them are not counted (gc.unfreeze() makes them "
            "visible again)",
            RuntimeWarning,
            stacklevel=4,
        )


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
            (one more pass over the parameters; callers that read the parameters'
            gradients through their modules can skip it).

    Returns:
        A :class:`LiveScan`. It holds tensors: use it and drop it before returning to
        user code.
    """
    plain, special = tensor_types()
    _warn_if_frozen()
    found, odd, owners, params, listed = _gc_tensors(plain, special, owner_types, gc_collect,
                                                     frozen_grads)
    result = LiveScan(owners=owners, gc_objects=listed)
    found, storages, no_storage = _storages(found)
    odd.extend(no_storage)
    for t in odd:
        for part in (sparse_parts(t) if t.layout != torch.strided else [t]):
            try:
                storage = _untyped_storage(part)
            except Exception:  # noqa: BLE001 - wrapper subclasses without a storage
                continue
            found.append(part)
            storages.append(storage)
    del odd, no_storage
    result.tensors = found
    result.storages = storages

    needs_grad = list(compress(found, map(_requires_grad, found)))
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
    unique = Storages(found.storages)
    t: Any = None
    for t in found.extra():
        try:
            unique.add(_untyped_storage(t))
        except Exception:  # noqa: BLE001 - sparse/wrapper tensors: no plain storage
            continue
    all_cpu = all(map(_is_cpu, found.tensors)) and all(map(_is_cpu, found.extra()))
    t = None
    found.clear()
    del found
    storages = unique.storages()
    unique.clear()
    sizes = list(map(_storage_nbytes, storages))
    if all_cpu:
        return {"cpu": sum(sizes)} if sizes else {}
    devices = list(map(_storage_device, storages))
    del storages
    kinds = set(devices)
    if len(kinds) == 1:
        totals = {kinds.pop(): sum(sizes)}
    else:
        totals = {dev: sum(compress(sizes, map(dev.__eq__, devices))) for dev in kinds}
    return {str(dev): n for dev, n in totals.items() if dev.type != "meta"}
