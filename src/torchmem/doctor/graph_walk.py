"""The autograd-graph part of the doctor's object walk (:mod:`torchmem.doctor.walker`).

From a tensor's ``grad_fn`` the walk visits every graph node not visited yet in this
snapshot, and counts what the graph keeps: its nodes, the bytes of the tensors saved for
backward (storages not owned by a module or optimizer, each once), the nodes whose saved
slots still hold values (``live``: never backpropagated, or ``retain_graph=True``) or were
freed by a backward pass (``freed``), and how many edges lead into the busiest
``AccumulateGrad`` (how many forward passes one graph chains: ``passes``).

Nothing is unpacked: no version check runs and no ``saved_tensors_hooks`` unpack hook is
called. Below a node that a backward pass freed, the nodes are counted without reading
their slots: that pass ran, and freed, every node under it (reading a freed slot costs
an exception each). (A partial ``torch.autograd.grad(out, inputs)`` runs only the nodes
that lead to ``inputs``; the others under a freed node are then counted as freed too.)

Cost: a few microseconds per node, most of it the slot reads of nodes not freed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from torchmem.collect.graph import (
    _next_functions,
    raw_saved_names,
    read_saved,
    storage_key,
    storage_nbytes,
)
from torchmem.doctor.pathstats import Snapshot

__all__ = ["GraphCounts", "walk_graph"]


class _WalkState(Protocol):
    """What the object walker shares with the graph walk (see ``walker._Walker``)."""

    snap: Snapshot
    max_nodes: int
    nodes_seen: set[int]
    node_keep: list[Any]
    owned: dict[int, int]
    storages: set[int]
    _leaf_type: type | None


@dataclass
class GraphCounts:
    """What one call of :func:`walk_graph` found (new nodes only)."""

    nodes: int = 0
    saved_bytes: int = 0
    live: int = 0
    freed: int = 0
    passes: int = 0


def _is_leaf_node(state: _WalkState, node: Any) -> bool:
    """True for ``AccumulateGrad`` (the node a graph accumulates a leaf's gradient in)."""
    cls = type(node)
    if state._leaf_type is None and cls.__name__ == "AccumulateGrad":
        state._leaf_type = cls
    return cls is state._leaf_type


def walk_graph(state: _WalkState, root: Any) -> GraphCounts:
    """Walk the graph under ``root``, the nodes ``state`` has not seen yet.

    Marks the nodes seen (and holds them, so that their ids stay unique during the
    snapshot), adds the saved storages it measured to ``state.storages`` and counts the
    nodes in ``state.snap.nodes``; stops at ``state.max_nodes`` (``snap.truncated``).
    """
    out = GraphCounts()
    queue: list[tuple[Any, bool]] = [(root, False)]
    into_leaf: dict[int, int] = {}
    snap, seen = state.snap, state.nodes_seen
    while queue:
        node, under_freed = queue.pop()
        nid = id(node)
        if nid in seen:
            continue
        if snap.nodes >= state.max_nodes:
            snap.truncated = True
            break
        seen.add(nid)
        state.node_keep.append(node)
        snap.nodes += 1
        out.nodes += 1
        try:
            variable = getattr(node, "variable", None)
        except Exception:  # noqa: BLE001 - an odd node
            variable = None
        if isinstance(variable, torch.Tensor):
            continue  # AccumulateGrad: a leaf (parameter) the graph points at
        if under_freed:
            node_freed = bool(raw_saved_names(node))
            out.freed += node_freed
        else:
            found = read_saved(node)
            for v in found.tensors:
                key = storage_key(v)
                if key is not None and key not in state.owned and key not in state.storages:
                    state.storages.add(key)
                    out.saved_bytes += storage_nbytes(v)
            out.live += found.live
            out.freed += found.freed
            node_freed = found.freed and not found.live
            del found
        for edge in _next_functions(node):
            nxt = edge[0] if isinstance(edge, tuple) and edge else None
            if nxt is not None and _is_leaf_node(state, nxt):
                into_leaf[id(nxt)] = into_leaf.get(id(nxt), 0) + 1
            if nxt is not None and id(nxt) not in seen:
                queue.append((nxt, node_freed))
    out.passes = max(into_leaf.values(), default=0)
    return out
