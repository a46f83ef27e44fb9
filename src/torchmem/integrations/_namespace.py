"""Who holds the tensors of a namespace, and which autograd graphs it keeps alive.

A notebook's globals outlive every cell: ``losses.append(loss)`` in a loop keeps each
step's autograd graph as long as ``losses`` exists, and ``out = model(x)`` keeps the
forward's saved activations until ``out`` is deleted. This module measures a namespace
once (:func:`~torchmem.doctor.culprit.take_snapshot`, the doctor's walker: every named
path -- ``losses``, ``trainer.history``, ``metrics['loss']``, ``Out[3]`` -- with the
tensors, graph nodes and saved activations first reached through it; parameters,
gradients and optimizer state are left out) and turns it into plain data:
:class:`Holder` rows and :class:`~torchmem.model.capture.Finding` objects whose fix is
written from the cell that adds to the culprit.

A single measurement has no per-step rate, so a path is a finding when what it holds is
wrong by itself: a container holding several tensors that carry autograd graphs, or a
variable whose graph still holds at least :data:`MIN_SAVED_BYTES` of saved activations.
Compared with an earlier measurement (``previous``), the change is part of the evidence,
and a graph that lengthened while its tensor count stayed the same (``total += loss``,
a hidden state carried from cell to cell) is a finding too.

Cost: the walk of what the namespace reaches (about 1-3 us per object and 3-6 us per
graph node, bounded by the walker's budget) and one ``ast`` parse per cell source, cached.
Holds nothing of the namespace afterwards.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from torchmem.doctor.culprit import PathStats, Snapshot, take_snapshot
from torchmem.doctor.fixes import TITLES, fix_for, internal_advice
from torchmem.doctor.internals import internal_owner
from torchmem.doctor.source import Statement, _Finder, parse_path
from torchmem.doctor.statement_rank import best_statement
from torchmem.model.capture import Culprit, Finding
from torchmem.units import MiB, format_bytes, format_delta

__all__ = ["Holder", "CellSource", "measure", "namespace_roots", "holders", "findings",
           "MIN_SAVED_BYTES", "MIN_CHAIN_GROWTH", "MIN_PINNED_BYTES"]

#: saved activations a single variable's graph must hold to be a finding by itself
MIN_SAVED_BYTES = 1 * MiB
#: storage bytes per tensor a view must leave unused to be "pinning" (a scalar loss such as
#: ``F.mse_loss``'s sits on a 64-byte storage: that is not a view pinning a storage)
MIN_PINNED_BYTES = 1024
#: graph nodes a single tensor's graph must gain between two measurements to be a chain
MIN_CHAIN_GROWTH = 8

# IPython's own names: the output cache aliases (``_``, ``_3``), input history (``_i3``)
# and the shell's helpers. ``Out`` itself is walked last, so that a tensor is attributed
# to the user's variable when there is one and to ``Out[n]`` only when the cache alone
# keeps it.
_SHELL_NAME = re.compile(r"^(_{1,3}|_\d+|_i{1,3}|_i\d+|_ih|_oh|_dh|In|Out|exit|quit|"
                         r"get_ipython|open)$")


@dataclass(frozen=True)
class CellSource:
    """The source of one executed cell: ``label`` is how reports name it (``In[3]``)."""

    filename: str
    label: str
    text: str


@dataclass(frozen=True)
class Holder:
    """One top-level variable and what it holds besides parameters and optimizer state.

    Attributes:
        path: the variable (``losses``, ``Out``).
        type: its type name.
        items: ``len()`` for a container, else None.
        tensors: tensor storages first reached through it; ``grad_tensors``: of those,
            tensors with a ``grad_fn``.
        bytes: their storage bytes plus the saved activations of the graphs they reach.
        graph_nodes: autograd nodes reached.
        change: bytes gained since the previous measurement (None: no previous one, or
            the variable is new).
    """

    path: str
    type: str
    items: int | None
    tensors: int
    grad_tensors: int
    bytes: int
    graph_nodes: int
    change: int | None = None


def namespace_roots(ns: Mapping[str, Any], hidden: Sequence[str] = ()) -> dict[str, Any]:
    """The user's variables of an IPython namespace in order, then ``Out`` (if present)."""
    skip = set(hidden)
    roots = {k: v for k, v in list(ns.items())
             if isinstance(k, str) and k not in skip and not _SHELL_NAME.match(k)
             and not (k.startswith("__") and k.endswith("__"))}
    out = ns.get("Out")
    if isinstance(out, dict) and out:
        roots["Out"] = out
    return roots


def measure(roots: Mapping[str, Any], is_user: Callable[[str], bool], step: int = 1) -> Snapshot:
    """Walk what ``roots`` reach (see the module docstring for the cost)."""
    return take_snapshot(step, None, dict(roots), is_user)


def _top(snap: Snapshot) -> list[PathStats]:
    return [s for s in snap.paths.values() if s.depth == 0 and s.tensors]


def holders(snap: Snapshot, previous: Snapshot | None = None, limit: int = 8) -> list[Holder]:
    """The top-level variables holding tensors, largest first (at most ``limit``)."""
    rows = sorted(_top(snap), key=lambda s: (-s.retained_bytes, s.path))[:limit]
    out = []
    for s in rows:
        before = previous.paths.get(s.path) if previous is not None else None
        change = s.retained_bytes - before.retained_bytes if before is not None else None
        out.append(Holder(s.path, s.type, s.items, s.tensors, s.grad_tensors, s.retained_bytes,
                          s.graph_nodes, change))
    return out


# -- findings -------------------------------------------------------------------------------
def _grew(stats: PathStats, before: PathStats | None) -> bool:
    if before is None:
        return stats.grad_tensors > 0 or stats.saved_bytes > 0
    return (stats.grad_tensors > before.grad_tensors or stats.saved_bytes > before.saved_bytes
            or stats.graph_nodes > before.graph_nodes)


def _chain(stats: PathStats, before: PathStats | None) -> bool:
    """One tensor whose graph lengthened since ``before``: a sum or state carried along."""
    return (before is not None and stats.grad_tensors == 1 and before.grad_tensors == 1
            and stats.items is None
            and stats.graph_nodes - before.graph_nodes >= MIN_CHAIN_GROWTH)


def _flagged(stats: PathStats, before: PathStats | None) -> bool:
    if stats.kind == "hook" or not stats.grad_tensors:
        return False
    if stats.items is not None and stats.grad_tensors >= 2:
        return True
    return stats.saved_bytes >= MIN_SAVED_BYTES or _chain(stats, before)


def _below(path: str, parent: str) -> bool:
    return len(path) > len(parent) and path.startswith(parent) and path[len(parent)] in ".[:"


def _culprits(flagged: dict[str, PathStats]) -> list[str]:
    """The most specific path for each flagged subtree: a child replaces its parent only
    when it holds all of the parent's graphs."""
    chosen: list[str] = []
    covered: list[str] = []
    for path in sorted(flagged, key=lambda p: (flagged[p].depth, p)):
        if any(_below(path, c) for c in covered):
            continue
        covered.append(path)
        best = path
        while True:
            top = flagged[best]
            kids = [p for p in flagged if _below(p, best)
                    and flagged[p].grad_tensors == top.grad_tensors
                    and flagged[p].retained_bytes == top.retained_bytes]
            if not kids:
                break
            best = min(kids, key=lambda p: (flagged[p].depth, p))
        chosen.append(best)
    return chosen


def _cause(stats: PathStats, before: PathStats | None) -> str:
    if (stats.retained_bytes and stats.pinned_bytes / stats.retained_bytes >= 0.5
            and stats.pinned_bytes >= MIN_PINNED_BYTES * max(stats.tensors, 1)):
        return "view_pins_storage"
    if _chain(stats, before):
        return "retained_graph" if stats.chain_numel == 1 else "hidden_state_chain"
    if stats.live_nodes and not stats.freed_nodes and stats.saved_bytes > 0:
        return "eval_graph"
    return "retained_graph"


@lru_cache(maxsize=256)
def _parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _statement(path: str, cells: Sequence[CellSource], want: str) -> Statement | None:
    """The statement that keeps adding to (or rebinding) ``path``, in the first of
    ``cells`` that has one (cells come newest first: where it ran last)."""
    wanted = parse_path(path)
    if not wanted or wanted[0] == "Out":
        return None
    for cell in cells:
        tree = _parsed(cell.text)
        if tree is None:
            continue
        finder = _Finder(cell.label, tuple(cell.text.splitlines()), wanted, False)
        finder.visit(tree)
        best = best_statement(finder.found, want, exact=path)
        if best is not None:
            return best
    return None


def _out_fix(path: str) -> str:
    n = path[4:-1] if path.startswith("Out[") and path.endswith("]") else "n"
    return (f"IPython's output cache keeps the value that cell [{n}] displayed: "
            f"`del Out[{n}], _{n}` (or `%reset -f out`); end a cell with `;` so that its "
            f"value is not cached")


def _fix(cause: str, stats: PathStats, stmt: Statement | None) -> str:
    if stats.path.startswith("Out[") or stats.path == "Out":
        return _out_fix(stats.path)
    owner = internal_owner(stats.path)
    if owner is not None:  # inside an object implemented in C: advice about the object
        return internal_advice(owner, None, stmt)
    where = f" (line {stmt.line} of {stmt.file}: `{stmt.code}`)" if stmt else ""
    if cause == "eval_graph" and stats.items is None and stats.grad_tensors == 1:
        return (f"free the graph: `del {stats.path}` (or keep `{stats.path} = "
                f"{stats.path}.detach()`), or compute it under `with torch.no_grad():` when no "
                f"backward() follows{where}")
    if cause == "eval_graph" and (stmt is None or stmt.kind in ("rebind", "assign")):
        return (f"compute it under `with torch.no_grad():` (or `torch.inference_mode()`) when "
                f"no backward() follows{where}, or `del {stats.path}` to free the graphs")
    scalar = stats.example is not None and stats.example.startswith("() ")
    return fix_for(cause, stats.path, stmt, scalar=scalar or stats.chain_numel == 1,
                   is_tuple=stats.type in ("tuple", "list"), has_graph=True)


def _evidence(cause: str, stats: PathStats, before: PathStats | None, since: str | None) -> list[str]:
    change = ""
    lines = []
    if stats.items is not None:
        if before is not None and before.items is not None and since:
            change = f" ({stats.items - before.items:+d} since {since})"
        lines.append(f"`{stats.path}` ({stats.type}) holds {stats.items} items{change}")
    ex = f"; largest {stats.example}" if stats.example else ""
    lines.append(f"reaches {stats.tensors} tensors ({stats.grad_tensors} with grad_fn) of "
                 f"{format_bytes(stats.storage_bytes)}{ex}")
    nodes = (f" ({stats.graph_nodes - before.graph_nodes:+d} since {since})"
             if before is not None and since else "")
    lines.append(f"keeps {stats.graph_nodes} autograd nodes alive{nodes} and "
                 f"{format_bytes(stats.saved_bytes)} of saved activations")
    if cause == "eval_graph":
        lines.append(f"{stats.live_nodes} of those nodes still hold their saved tensors: no "
                     "backward() ran through them")
    if cause == "view_pins_storage":
        lines.append(f"the tensors use {format_bytes(stats.used_bytes)} but pin "
                     f"{format_bytes(stats.storage_bytes)} of storage")
    if before is not None and since:
        lines.append(f"{format_delta(stats.retained_bytes - before.retained_bytes)} of tensor "
                     f"storage and saved activations since {since}")
    return lines


def findings(snap: Snapshot, cells: Sequence[CellSource] = (), *,
             previous: Snapshot | None = None, since: str | None = None,
             changed_only: bool = False, device: str = "cpu") -> list[Finding]:
    """Findings for the graphs ``snap`` shows kept alive, largest first.

    Args:
        snap: the measurement (:func:`measure`).
        cells: the executed cells, newest first, searched for the statement that adds to
            a culprit.
        previous: an earlier measurement of the same namespace: its change is evidence.
        since: how to name the moment of ``previous`` (``"In[2]"``, ``"the cell began"``).
        changed_only: report only paths whose graphs grew since ``previous`` (a cell's
            own findings).
        device: the device the findings name (the walk does not split paths by device).
    """
    before_of = previous.paths.get if previous is not None else (lambda _p: None)
    flagged = {p: s for p, s in snap.paths.items() if _flagged(s, before_of(p))
               and (not changed_only or _grew(s, before_of(p)))}
    out = []
    for path in _culprits(flagged):
        stats, before = flagged[path], before_of(path)
        cause = _cause(stats, before)
        want = "chain" if cause in ("hidden_state_chain",) or _chain(stats, before) else "container"
        stmt = _statement(path, cells, want)
        if stmt is None and want == "chain":
            stmt = _statement(path, cells, "container")
        if stats.depth == 0:
            kind = stats.kind
        else:
            kind = "container" if "[" in path.rsplit(".", 1)[-1] else "attribute"
        culprit = Culprit(name=path, kind=kind,
                          file=stmt.file if stmt else None, line=stmt.line if stmt else None,
                          code=stmt.code if stmt else None,
                          function=stmt.function if stmt else stats.function, type=stats.type)
        data = {"items": stats.items, "tensors": stats.tensors,
                "grad_tensors": stats.grad_tensors, "graph_nodes": stats.graph_nodes,
                "saved_bytes": stats.saved_bytes, "live_nodes": stats.live_nodes,
                "freed_nodes": stats.freed_nodes, "storage_bytes": stats.storage_bytes,
                "used_bytes": stats.used_bytes, "example": stats.example,
                "bytes_measure": "tensor_storage"}
        if before is not None:
            data["bytes_change"] = stats.retained_bytes - before.retained_bytes
        out.append(Finding(cause=cause, title=TITLES[cause], device=device,
                           bytes=stats.retained_bytes, culprit=culprit,
                           evidence=tuple(_evidence(cause, stats, before, since)), data=data,
                           fix=_fix(cause, stats, stmt),
                           confidence="high" if stmt is not None else "medium"))
    out.sort(key=lambda f: (-f.bytes, f.culprit.name if f.culprit else ""))
    return out
