"""Private: which storages a scope may free without an autograd graph reading them later.

A scope frees a storage only when it can account for every reference to it:

* the storage's ``StorageImpl`` is referenced by tensor impls (and one Python storage
  object); each impl must be one the scope holds a Python object for -- a tensor it
  saw, the base of such a view, or a tensor that a *dying* graph saved;
* each of those impls is referenced by its Python object, by the views over it, and by
  the saved variables of dying graphs -- nothing else.

A graph is *live* when a tensor that outlives the scope reaches it: a kept tensor, a
pre-existing tensor an op mutated inside the scope (``total += loss``), or a tensor the
scope does not free. What a live graph saved is never freed. A graph reached only from
tensors the scope frees is *dying*: those tensors become released tensors, which can
no longer start a backward pass.

Any reference the scope cannot explain (a C++ container, ``torch.utils.checkpoint``'s
saved inputs, a ``.data`` alias, an autograd node held elsewhere) protects the storage.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Any, Iterable

import torch

from torchmem.collect.graph import raw_saved_names, storage_key

__all__ = ["LiveGraphs", "DyingSaves", "NO_GRAPHS", "can_account", "impl_counts_available"]

_impl_use_count = getattr(torch.Tensor, "_use_count", None)
_storage_use_count = getattr(torch._C, "_storage_Use_Count", None)


def impl_counts_available() -> bool:
    """True when this torch exposes the reference counts the accounting needs."""
    return _impl_use_count is not None and _storage_use_count is not None


_PYTHON_NODE = torch.autograd.function.BackwardCFunction


def held_saved(node: Any, *, packed: bool = False) -> list[torch.Tensor]:
    """The tensor impls ``node``'s saved variables hold, as Python tensors.

    Each returned tensor *is* the impl the saved variable holds (``SavedTensor.data``),
    never a fresh unpacked copy, so reference counts can be compared with it. Slots
    packed by ``saved_tensors_hooks`` are never unpacked (their unpack hook is never
    called): with ``packed=True`` the tensors the packed value holds directly (a
    tensor, or a tuple/list of them, as ``save_on_cpu`` packs) are returned too.
    Freed and unreadable slots are skipped. Never raises.
    """
    out: list[torch.Tensor] = []
    for name in raw_saved_names(node):
        try:
            value = getattr(node, name)
        except Exception:  # noqa: BLE001 - freed by backward, or an odd node
            continue
        for raw in value if isinstance(value, (list, tuple)) else (value,):
            try:
                if raw is None:
                    continue
                hooked = raw.unpack_hook is not None
                if hooked and not packed:
                    continue
                data = raw.data
            except Exception:  # noqa: BLE001 - torch without the introspection API
                continue
            if isinstance(data, torch.Tensor):
                out.append(data)
            elif hooked and isinstance(data, (list, tuple)):
                out.extend(v for v in data if isinstance(v, torch.Tensor))
    return out


def _grad_fns(tensors: Iterable[torch.Tensor]) -> list[Any]:
    out = []
    for t in tensors:
        try:
            fn = t.grad_fn
        except RuntimeError:
            continue
        if fn is not None:
            out.append(fn)
    return out


class LiveGraphs:
    """The nodes of graphs that stay alive after the scope, and the storages they saved.

    Lazy and incremental: :meth:`add` only queues the roots' ``grad_fn``; the graphs are
    walked (only nodes not seen before) when :attr:`nodes` or :attr:`saved_keys` is
    first read after it, so a scope with nothing left to free walks nothing.
    """

    def __init__(self) -> None:
        # id -> node wrapper; holding the wrappers keeps their ids unique
        self._nodes: dict[int, Any] = {}
        self._saved_keys: set[int] = set()
        self._pending: list[Any] = []

    def add(self, tensors: Iterable[torch.Tensor]) -> None:
        self._pending.extend(_grad_fns(tensors))

    @property
    def nodes(self) -> dict[int, Any]:
        self._walk()
        return self._nodes

    @property
    def saved_keys(self) -> set[int]:
        self._walk()
        return self._saved_keys

    def _walk(self) -> None:
        if not self._pending:
            return
        queue: deque[Any] = deque(self._pending)
        self._pending = []
        nodes = self._nodes
        while queue:
            node = queue.popleft()
            if id(node) in nodes:
                continue
            nodes[id(node)] = node
            saved = held_saved(node, packed=True)
            for u in saved:
                k = storage_key(u)
                if k is not None:
                    self._saved_keys.add(k)
            del saved
            for nxt, _ in getattr(node, "next_functions", ()):
                if nxt is not None and id(nxt) not in nodes:
                    queue.append(nxt)


class DyingSaves:
    """Saved tensors of the graphs reachable from the candidates and not from a live graph.

    Holds the unpacked tensors (strong references) until :meth:`clear`; every unpacked
    tensor shares its impl with the saved variable it came from.
    """

    def __init__(self, roots: Iterable[torch.Tensor], keys: set[int], live: LiveGraphs) -> None:
        self.by_key: dict[int, list[torch.Tensor]] = {}
        # storages saved by custom autograd.Function nodes: their ctx is a Python object
        # anything may hold (torch.utils.checkpoint keeps one for its recomputation), so
        # their graph cannot be shown to die with the freed tensors
        self.pinned: set[int] = set()
        seen: dict[int, Any] = {}
        live_nodes = live.nodes
        queue: deque[Any] = deque(_grad_fns(roots))
        while queue:
            node = queue.popleft()
            if id(node) in seen or id(node) in live_nodes:
                continue
            seen[id(node)] = node
            python_node = isinstance(node, _PYTHON_NODE)
            for u in held_saved(node):
                k = storage_key(u)
                if k in keys:
                    self.by_key.setdefault(k, []).append(u)
                    if python_node:
                        self.pinned.add(k)
            for nxt, _ in getattr(node, "next_functions", ()):
                if nxt is not None and id(nxt) not in seen:
                    queue.append(nxt)
        seen.clear()

    def clear(self) -> None:
        self.by_key.clear()


NO_GRAPHS = DyingSaves((), set(), LiveGraphs())
"""No dying graph: every saved variable that refers to a storage is a live holder."""


def can_account(storage: Any, key: int, objs: list[torch.Tensor], dying: DyingSaves,
                holders: Counter[int] | None = None) -> list[torch.Tensor] | None:
    """Every tensor impl over ``storage``, if each reference to it is explained; else None.

    Args:
        storage: the untyped storage (its Python object, held by the caller).
        key: its storage key.
        objs: the live tensor objects the scope saw over it.
        dying: saved tensors of dying graphs.
        holders: ``id(tensor)`` -> references the caller explains itself (a parameter
            that is released too holds its ``.grad``).

    Returns:
        The tensors to invalidate and mark released (the seen ones, the bases of views,
        the saved copies), or ``None`` when something else refers to the storage.
    """
    if _impl_use_count is None or _storage_use_count is None:
        return None
    saved = dying.by_key.get(key, ())
    impls: dict[int, torch.Tensor] = {id(t): t for t in objs}
    occurrences: Counter[int] = Counter()
    for u in saved:
        occurrences[id(u)] += 1
        impls.setdefault(id(u), u)
    for u in list(impls.values()):
        b = u._base
        if b is not None and id(b) not in impls and storage_key(b) == key:
            impls[id(b)] = b
    base_refs: Counter[int] = Counter()
    for u in impls.values():
        b = u._base
        if b is not None and id(b) in impls:
            base_refs[id(b)] += 1
    try:
        # one reference per impl, plus the Python storage object the caller holds
        if int(_storage_use_count(storage._cdata)) > len(impls) + 1:
            return None
        for i, u in impls.items():
            explained = 1 + occurrences[i] + base_refs[i] + (holders[i] if holders else 0)
            if int(_impl_use_count(u)) > explained:
                return None
    except (RuntimeError, TypeError, AttributeError):
        return None
    return list(impls.values())
