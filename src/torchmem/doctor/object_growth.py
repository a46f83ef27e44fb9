"""Heap growth kept by Python containers of things that are not tensors.

A dict of lists that gets a float, a numpy array or a tuple every step grows the heap as
surely as a list of tensors, yet holds no tensor storage: the path findings of
:mod:`torchmem.doctor.causes` (which weigh tensor bytes and graphs) never see it, and
:func:`torchmem.doctor.held.untracked_findings` stays quiet because a path does grow.
:func:`container_findings` names such a container when all of these hold:

* the run trains: ``backward()`` ran in most steps (a script that only runs a model
  collects its outputs on purpose: a list of predictions grows by design);
* the heap (the CPU growth verdict) grows steadily: the same bar as growth nothing
  explains (:data:`~torchmem.doctor.held.MIN_UNTRACKED_PER_STEP`, R^2
  :data:`~torchmem.doctor.held.MIN_UNTRACKED_R2`), and no other finding explains it;
* live tensor storage stays flat (less than half of the heap's growth per step);
* a walked container grew in length in the last interval between snapshots and in the
  one before, never shrank between any two (a list cleared now and then is not kept
  forever), has no capacity (``deque(maxlen=N)`` levels off), and the heap its items take
  (:func:`torchmem.doctor.item_sizes.estimated_bytes`) grows by at least
  :data:`MIN_SHARE` of the heap's growth per step.

The fastest of those (estimated bytes per step) is the culprit, with the statement that
adds to it (:func:`torchmem.doctor.source.find_statements`, lifted to the caller of a
helper as for tensor findings: :func:`torchmem.doctor.call_sites.caller_statement`). Its
size is the estimate, said to be one.
"""

from __future__ import annotations

import ast
from typing import Sequence

from torchmem.doctor.call_sites import caller_statement, enclosing_function
from torchmem.doctor.fixes import internal_advice
from torchmem.doctor.held import MIN_UNTRACKED_PER_STEP, MIN_UNTRACKED_R2
from torchmem.doctor.internals import binding_statement, describe, internal_owner
from torchmem.doctor.evidence import Evidence
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.source import Statement, find_statements, load_tree
from torchmem.doctor.statement_rank import best_statement
from torchmem.model.capture import Culprit, Finding, Growth
from torchmem.units import format_bytes

__all__ = ["container_findings", "collected_outputs", "memo_store", "MIN_SHARE", "TITLE"]

TITLE = "container of Python objects grows without bound"
#: a container's estimated growth must be at least this share of the heap's growth
MIN_SHARE = 0.25


def _series(snaps: Sequence[Snapshot], path: str) -> list[tuple[int, PathStats]]:
    return [(s.step, s.paths[path]) for s in snaps if path in s.paths]


def _grows(values: list[int]) -> bool:
    """Never shrank, and grew in the last interval and in the one before (if any)."""
    if len(values) < 2 or any(b < a for a, b in zip(values, values[1:])):
        return False
    return values[-1] > values[-2] and (len(values) == 2 or values[-2] > values[-3])


def _candidate(series: list[tuple[int, PathStats]]) -> tuple[float, float] | None:
    """(items per step, estimated bytes per step) of a steadily growing container."""
    last = series[-1][1]
    if last.items is None or last.capacity is not None or last.kind in ("hook", "grad"):
        return None
    sizes = [s.item_bytes for _, s in series]
    if any(b is None for b in sizes) or not _grows([s.items or 0 for _, s in series]):
        return None
    (first_step, first), (last_step, _) = series[0], series[-1]
    span = max(last_step - first_step, 1)
    per_step = ((sizes[-1] or 0) - (sizes[0] or 0)) / span
    return ((last.items or 0) - (first.items or 0)) / span, per_step


def _statement(stats: PathStats,
               owner_type: str | None) -> tuple[Statement | None, Statement | None]:
    """(the statement that adds to the container, the call that hands the values to it
    when that statement sits in a helper); inside a C object of type ``owner_type``, the
    statement that binds the object."""
    files = [f for f in (stats.owner_file, stats.file) if f]
    stmt = binding_statement(stats.path, files, stats.function, owner_type) or best_statement(
        find_statements(stats.path, files), "container", function=stats.function,
        exact=stats.path)
    site = caller_statement(stmt, files) if stmt is not None else None
    return stmt, site[0] if site else None


def container_findings(snaps: Sequence[Snapshot], growth: Growth | None, steps: int,
                       explained: bool, trains: bool = True) -> list[Finding]:
    """The container of Python objects that keeps the heap growing (see the module), or
    nothing. ``trains``: backward ran in most steps (a run that only infers collects its
    outputs by design: there only a cache keyed by input, :func:`memo_store`, is reported)."""
    if explained or growth is None or growth.verdict != "growing" or growth.stretches:
        return []  # judged on a steady line only
    if growth.bytes_per_step < MIN_UNTRACKED_PER_STEP or growth.r2 < MIN_UNTRACKED_R2:
        return []
    walked = [s for s in snaps if s.paths]
    if len(walked) < 2:
        return []
    heap = growth.bytes_per_step
    measured = [(s.step, s.unreached) for s in snaps if s.unreached is not None]
    if len(measured) >= 2:
        (a_step, a), (b_step, b) = measured[0], measured[-1]
        if (b.tensor_bytes - a.tensor_bytes) / max(b_step - a_step, 1) >= 0.5 * heap:
            return []  # tensors grow: the path findings' business
    found: list[tuple[float, float, str]] = []
    for path in walked[-1].paths:
        series = _series(walked, path)
        rates = _candidate(series)
        if rates is not None and rates[1] >= MIN_SHARE * heap:
            found.append((rates[1], rates[0], path))
    if not trains:  # outputs collected by design; a cache keyed by input is not that
        found = [f for f in found if memo_store(_statement(walked[-1].paths[f[2]], None)[0])]
    if not found:
        return []
    found.sort(key=lambda f: (-f[0], -walked[-1].paths[f[2]].depth, f[2]))
    per_step, items_per_step, path = found[0]
    stats = walked[-1].paths[path]
    series = _series(walked, path)
    (first_step, first), (last_step, _) = series[0], series[-1]
    owner = internal_owner(path)
    owner_stats = walked[-1].paths.get(owner) if owner is not None else None
    owner_type = owner_stats.type if owner_stats is not None else None
    stmt, site = _statement(stats, owner_type)
    shown = site or stmt
    culprit = Culprit(name=path, kind="container" if stats.depth else stats.kind,
                      file=shown.file if shown else stats.file,
                      line=shown.line if shown else None, code=shown.code if shown else None,
                      function=shown.function if shown else stats.function, type=stats.type)
    last_kind = f" (the last one a `{stats.item_type}`)" if stats.item_type else ""
    evidence = [
        f"`{path}` ({stats.type}) holds {stats.items} items at step {last_step} "
        f"({first.items} at step {first_step}){last_kind}: {items_per_step:.2f} items added "
        "per step, never emptied",
        f"~{format_bytes(per_step)} per step by estimate (sys.getsizeof of the container and "
        f"of its last items, three levels deep: an estimate, not a measurement), "
        + (f"about {per_step / heap:.0%} of the heap's growth" if per_step <= heap else
           "more than the C heap's growth: Python keeps objects of up to 512 bytes in "
           "arenas of its own, which the C heap reading does not count"),
        f"the C heap grows by {format_bytes(heap)} per step (steps {growth.first_step}-"
        f"{growth.last_step}, R^2 {growth.r2:.2f}) while live tensor storage stays flat: "
        "what grows is Python objects, not tensors",
    ]
    if site is not None and stmt is not None:
        evidence.insert(0, f"`{stmt.code}` (line {stmt.line}, in `{stmt.function}`) keeps what "
                           f"it is handed: the values come from `{site.code}` (line {site.line})")
    if owner is not None:
        evidence.insert(0, describe(path, owner_type, stats.type))
    others = [p for _, _, p in found[1:4]]
    if others:
        evidence.append("also growing: " + ", ".join(f"`{p}`" for p in others))
    where = f" (line {shown.line}: `{shown.code}`)" if shown else ""
    fix = internal_advice(owner, owner_type, shown) if owner is not None else (
        f"bound `{path}`{where}: keep the last N values (`collections.deque(maxlen=N)`), "
        "running summaries (a sum and a count) instead of every value, or write them out "
        "and clear it every epoch")
    end = max(steps, last_step)
    at_end = int((stats.item_bytes or 0) + per_step * (end - last_step))
    return [Finding(
        cause="growing_container", title=TITLE, device="cpu", bytes=at_end,
        bytes_per_step=round(per_step, 1), culprit=culprit, evidence=tuple(evidence), fix=fix,
        confidence="medium" if shown is not None else "low", fix_kind="advice",
        data={"items": stats.items, "items_per_step": round(items_per_step, 2),
              "estimated_bytes": stats.item_bytes, "estimated_bytes_per_step": round(per_step, 1),
              "heap_bytes_per_step": heap, "snapshot_steps": [s for s, _ in series],
              "item_type": stats.item_type, "end_step": end, "bytes_measure": "python_estimate"})]


def memo_store(stmt: Statement | None) -> bool:
    """Whether ``stmt`` stores into a dict by key (``cache[key] = value``) in a function that
    also looks the same dict up (``key in cache``, ``cache[key]``, ``cache.get(key)``): a
    cache keyed by input, which grows with every input it has not seen."""
    if stmt is None or stmt.kind != "setitem" or not stmt.target:
        return False
    parsed = load_tree(stmt.file)
    fn = enclosing_function(parsed[0], stmt.line) if parsed is not None else None
    return fn is not None and any(_looks_up(node, stmt.target) for node in ast.walk(fn))


def _looks_up(node: ast.AST, target: str) -> bool:
    if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
        return any(ast.unparse(c) == target for c in node.comparators)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return ast.unparse(node.value) == target
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("get", "setdefault", "__contains__"):
        return ast.unparse(node.func.value) == target
    return False


def collected_outputs(cause: str, stats: PathStats, stmt: Statement | None,
                       ev: Evidence) -> bool:
    """Numpy arrays of the outputs that a script which only runs a model collects in its
    own code (``result.append(output.cpu().numpy())``): what it is asked to produce, as
    for arrays that own their data (:mod:`torchmem.doctor.object_growth`). Appended by a
    function registered as a hook, they are a side effect of every forward, and stay a
    finding."""
    if cause != "growing_container" or not 0 < stats.storage_bytes <= 2 * stats.array_bytes \
            or ev.backward_steps >= 0.5 * ev.steps:
        return False
    hooks = {n for snap in ev.snapshots[-1:] for st in snap.paths.values()
             if st.kind == "hook" for n in st.hook_names}
    if stmt is not None and stmt.function in hooks:
        return False
    ev.notes.append(f"`{stats.path}` collects numpy arrays of the outputs "
                    f"({format_bytes(stats.array_bytes)} of tensor memory they share at the "
                    "last snapshot): a script that only runs a model is taken to collect its "
                    "outputs on purpose; not reported as a finding")
    return True
