"""Walk autograd graphs: which nodes and which saved tensors a ``grad_fn`` keeps alive.

This is the shared primitive behind the census role "saved-for-backward activation" and
the doctor's proof that a variable retains a graph. It only reads the graph: nothing is
kept after a walk returns except integer storage keys and byte counts.

Cost: one attribute lookup per saved slot of each node, plus one ``dir()`` per *node
type* (cached). Walking a graph of N nodes costs roughly N x 2-5 us on a laptop CPU.

Saved tensors are read through torch's raw accessors (``node._raw_saved_<name>`` for
built-in nodes, ``node._raw_saved_tensors`` for custom ``autograd.Function`` and
``torch.compile`` nodes), which hand back the stored value *without* unpacking it: no
version-counter check, no error on freed nodes, and no call of a ``saved_tensors_hooks``
unpack hook (for non-reentrant ``torch.utils.checkpoint`` such a call would recompute the
forward, or raise). Any node kind is walked without raising: a slot that cannot be read
is skipped.

Known limitations:
    * Tensors saved by custom ``autograd.Function`` subclasses through
      ``ctx.save_for_backward`` are found; tensors stored as plain ``ctx`` attributes are
      invisible to torch and so to this walk.
    * Saved tensors packed by ``saved_tensors_hooks`` are never unpacked: the walk counts
      the tensors the packed value holds directly (a tensor, or a tuple/list of tensors,
      e.g. a CPU copy of an offloaded activation) and nothing for other packed objects
      (checkpoint's placeholders hold no activation, which is the truth).
    * On a torch without ``SavedTensor.unpack_hook`` (older than the raw API this module
      reads) saved tensors cannot be told apart from hook-packed ones and are not read.
    * Once backward has run without ``retain_graph=True`` the saved tensors are freed;
      the walk then counts the nodes but no saved bytes, which is the truth.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch

__all__ = ["storage_key", "storage_nbytes", "iter_nodes", "saved_tensors", "read_saved", "Saved",
           "saved_names", "raw_saved_names", "held_by_own_graph",
           "GraphWalk", "walk"]

_ATTRS: dict[tuple[type, str], tuple[str, ...]] = {}
#: the text of torch's error for a saved tensor that backward already freed
_FREED = ("freed", "second time")


def storage_key(t: torch.Tensor) -> int | None:
    """Identity of the storage behind ``t``, stable while that storage lives.

    Views of one tensor share a key. Returns ``None`` for tensors without a plain
    storage (sparse, nested, some wrapper subclasses, meta/fake tensors count too).
    """
    try:
        if t.is_sparse or t.is_nested or t.device.type == "meta":
            return None
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return None


def storage_nbytes(t: torch.Tensor) -> int:
    """Bytes of the whole storage behind ``t`` (not just the bytes the view uses)."""
    try:
        return int(t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return 0


def _attrs(node: Any, prefix: str) -> tuple[str, ...]:
    """Names of ``node``'s attributes that start with ``prefix`` (cached per node type)."""
    key = (type(node), prefix)
    attrs = _ATTRS.get(key)
    if attrs is None:
        try:
            names = dir(node)
        except Exception:  # noqa: BLE001 - an odd node type: nothing to read
            names = []
        attrs = tuple(a for a in names if a.startswith(prefix)
                      and not a.endswith(("_sym_sizes", "_sym_strides")))
        _ATTRS[key] = attrs
    return attrs


def saved_names(node: Any) -> tuple[str, ...]:
    """Names of ``node``'s ``_saved_*`` accessors (reading one unpacks it: prefer raw)."""
    return _attrs(node, "_saved_")


def raw_saved_names(node: Any) -> tuple[str, ...]:
    """Names of ``node``'s ``_raw_saved_*`` accessors (``SavedTensor`` objects)."""
    return _attrs(node, "_raw_saved_")


@dataclass
class Saved:
    """What one graph node saved for backward, read without unpacking anything.

    Attributes:
        tensors: the tensors the node holds (for hook-packed slots: the tensors the
            packed value holds directly).
        live: some slot still holds its value (the graph was never backpropagated, or
            with ``retain_graph=True``).
        freed: some slot was freed by a backward pass.
        hooked: slots packed by ``saved_tensors_hooks`` (checkpoint, offloading).
        unreadable: slots that could not be read at all (unknown node kinds).
    """

    tensors: list[torch.Tensor] = field(default_factory=list)
    live: bool = False
    freed: bool = False
    hooked: int = 0
    unreadable: int = 0


def _packed_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _hook_of(raw: Any) -> Any:
    """The unpack hook of a raw saved value, None without one; raises AttributeError on a
    torch that cannot tell."""
    return raw.unpack_hook


def _read_plain(node: Any, name: str, out: Saved) -> None:
    """Read an unhooked slot through its normal accessor: a fresh tensor sharing storage.

    (``SavedTensor.data`` would wrap the stored tensor itself in a Python object that
    then lives as long as the graph, and makes it visible to ``gc``.)
    """
    try:
        value = getattr(node, name)
    except RuntimeError as err:
        if any(k in str(err) for k in _FREED):
            out.freed = True
        else:  # "modified by an inplace operation": a live slot whose version moved on
            out.live = True
        return
    except Exception:  # noqa: BLE001 - exotic value
        out.unreadable += 1
        return
    for v in (value if isinstance(value, (list, tuple)) else (value,)):
        if isinstance(v, torch.Tensor):
            out.live = True
            out.tensors.append(v)


def _read_hooked(raws: Iterable[Any], out: Saved) -> None:
    """Count hook-packed slots by their packed values; the unpack hook is never called."""
    for raw in raws:
        out.hooked += 1
        out.live = True
        out.tensors.extend(_packed_tensors(raw.data))


def held_by_own_graph(t: torch.Tensor) -> bool:
    """Whether ``t``'s own ``grad_fn`` holds ``t`` itself in a slot packed by
    ``saved_tensors_hooks``: a pack hook that returned the tensor it was given (``lambda
    x: x``) makes ``t -> grad_fn -> packed value -> t`` a cycle inside autograd, which
    neither reference counting nor ``gc`` frees. Never unpacks; never raises."""
    fn = t.grad_fn
    if fn is None:
        return False
    try:
        for attr in raw_saved_names(fn):
            value = getattr(fn, attr)
            for raw in (value if isinstance(value, (list, tuple)) else (value,)):
                if raw is not None and _hook_of(raw) is not None \
                        and any(p is t for p in _packed_tensors(raw.data)):
                    return True
    except Exception:  # noqa: BLE001 - freed slots, old torch, exotic nodes: not evidence
        return False
    return False


def read_saved(node: Any) -> Saved:
    """What ``node`` saved for backward, for any node kind; never raises.

    Handles built-in nodes (``_raw_saved_<name>``), custom ``autograd.Function`` and
    ``torch.compile`` nodes (``_raw_saved_tensors``), nodes whose saved tensors were freed
    by a backward pass, and slots packed by ``saved_tensors_hooks``: those are never
    unpacked (for checkpoint that would recompute the forward, or raise).
    """
    out = Saved()
    for attr in raw_saved_names(node):
        try:
            value = getattr(node, attr)
        except RuntimeError as err:  # custom Function nodes raise once backward freed them
            if any(k in str(err) for k in _FREED):
                out.freed = True
            else:
                out.unreadable += 1
            continue
        except Exception:  # noqa: BLE001 - never fail a walk on an odd node
            out.unreadable += 1
            continue
        raws = [r for r in (value if isinstance(value, (list, tuple)) else (value,))
                if r is not None]
        try:
            hooked = [r for r in raws if _hook_of(r) is not None]
        except AttributeError:  # torch without the introspection API: cannot tell, skip
            out.unreadable += len(raws)
            continue
        except Exception:  # noqa: BLE001
            out.unreadable += len(raws)
            continue
        try:
            if hooked:
                _read_hooked(hooked, out)
                out.unreadable += len(raws) - len(hooked)
            elif attr == "_raw_saved_tensors" and not hasattr(type(node), "_saved_tensors"):
                _read_plain(node, "saved_tensors", out)  # custom Function / compiled nodes
            elif raws or attr != "_raw_saved_tensors":
                _read_plain(node, "_saved_" + attr[len("_raw_saved_"):], out)
        except Exception:  # noqa: BLE001 - never fail a walk on an odd value
            out.unreadable += 1
    return out


def saved_tensors(node: Any) -> list[torch.Tensor]:
    """Tensors a graph node saved for backward (empty once backward freed them).

    Never raises and never calls a ``saved_tensors_hooks`` unpack hook (see
    :func:`read_saved`).
    """
    return read_saved(node).tensors


def _next_functions(node: Any) -> tuple[Any, ...]:
    try:
        nxt = node.next_functions
        return tuple(nxt) if nxt is not None else ()
    except Exception:  # noqa: BLE001 - an odd node: a dead end, not an error
        return ()


def iter_nodes(roots: Iterable[Any], limit: int | None = None,
               prune: Callable[[Any], bool] | None = None) -> Iterator[Any]:
    """Yield every node reachable from ``roots`` (grad_fn objects), each once, breadth first.

    ``prune(node)``, asked after the consumer has had ``node``, stops the walk from going
    past it (its ``next_functions`` are not followed from there).
    """
    # id -> node: holding the node wrappers while walking keeps their ids from being
    # reused by the wrappers that next_functions creates for other nodes
    seen: dict[int, Any] = {}
    queue: deque[Any] = deque(r for r in roots if r is not None)
    count = 0
    while queue:
        node = queue.popleft()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        yield node
        count += 1
        if limit is not None and count >= limit:
            return
        if prune is not None and prune(node):
            continue
        for edge in _next_functions(node):
            nxt = edge[0] if isinstance(edge, tuple) and edge else None
            if nxt is not None and id(nxt) not in seen:
                queue.append(nxt)


@dataclass
class GraphWalk:
    """What a set of autograd graphs holds.

    Attributes:
        nodes: number of distinct graph nodes reached.
        saved: storage key -> storage bytes, for every tensor saved for backward.
        leaves: storage key -> storage bytes, for the leaf tensors (``AccumulateGrad``
            variables, usually parameters) the graph points at. Leaves are *not* kept
            alive by the graph alone when their module holds them too.
        node_types: node class name -> count (e.g. ``{"AddmmBackward0": 3}``).
        truncated: True when ``limit`` stopped the walk early.
    """

    nodes: int = 0
    saved: dict[int, int] = field(default_factory=dict)
    leaves: dict[int, int] = field(default_factory=dict)
    node_types: dict[str, int] = field(default_factory=dict)
    truncated: bool = False

    def saved_bytes(self, exclude: Iterable[int] = ()) -> int:
        """Sum of saved storages' bytes, leaving out the given storage keys."""
        skip = set(exclude)
        return sum(n for k, n in self.saved.items() if k not in skip)


def walk(roots: Iterable[Any], limit: int | None = None) -> GraphWalk:
    """Walk the graphs under ``roots`` (``grad_fn`` nodes, or tensors) and total them.

    Args:
        roots: graph nodes, or tensors whose ``grad_fn`` is used (tensors without one
            are skipped).
        limit: stop after this many nodes (the result says ``truncated``).

    Returns:
        A :class:`GraphWalk` holding only integer keys and counts.
    """
    nodes: list[Any] = []
    for r in roots:
        if isinstance(r, torch.Tensor):
            if r.grad_fn is not None:
                nodes.append(r.grad_fn)
        elif r is not None:
            nodes.append(r)
    result = GraphWalk()
    for node in iter_nodes(nodes, limit=None if limit is None else limit + 1):
        if limit is not None and result.nodes >= limit:
            result.truncated = True
            break
        result.nodes += 1
        name = type(node).__name__
        result.node_types[name] = result.node_types.get(name, 0) + 1
        try:
            variable = getattr(node, "variable", None)
        except Exception:  # noqa: BLE001 - odd node
            variable = None
        if isinstance(variable, torch.Tensor):
            key = storage_key(variable)
            if key is not None:
                result.leaves[key] = storage_nbytes(variable)
            continue
        for t in saved_tensors(node):
            key = storage_key(t)
            if key is not None:
                result.saved[key] = storage_nbytes(t)
    return result
