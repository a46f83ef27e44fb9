"""Turn the doctor's evidence into ranked findings: cause, culprit, bytes, proof and fix.

Evidence comes from :class:`Evidence`, filled by the probe while the script runs:
per-path snapshots at a few step boundaries (:mod:`torchmem.doctor.culprit`), the
backward flags seen each step, gradient checks, what private garbage collections found,
``empty_cache`` calls and allocator statistics. Classification uses what the objects
*are*, never their names:

* a path whose tensors-with-``grad_fn`` count grows -> ``retained_graph``; if those
  graphs still hold their saved tensors (never backpropagated) -> ``eval_graph``; if
  most of the bytes are storage the views do not use -> ``view_pins_storage``; if the
  steps ran ``backward(retain_graph=True/create_graph=True)`` -> ``backward_flags_graph``;
* a path whose tensor count stays the same but whose reachable graph grows -> one
  tensor chains the steps: ``hidden_state_chain`` (a running scalar sum such as
  ``total += loss`` is a ``retained_graph``);
* detached tensors accumulating -> ``growing_container`` (or ``view_pins_storage``);
  module hook dicts that grow -> ``growing_container`` of hooks;
* tensors found only in cyclic garbage -> ``reference_cycle``;
* gradients accumulated across optimizer steps with no clearing -> ``grad_not_cleared``;
* CUDA: inactive split blocks -> ``fragmentation``; ``empty_cache`` every step ->
  ``cache_thrash``.

A path counts as growing only when it grew in the last interval between snapshots *and*
in the one before (a cache that fills and then stops, or a bounded deque, is quiet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from torchmem.doctor import edits as fix_edit
from torchmem.doctor.culprit import PathStats, Snapshot
from torchmem.doctor.fixes import TITLES, fix_for
from torchmem.doctor.source import Statement, best_statement, find_statements
from torchmem.model.capture import CAUSES, Culprit, Finding, Growth
from torchmem.units import KiB, format_bytes

__all__ = ["Evidence", "GarbageRecord", "GradCheck", "diagnose", "path_findings",
           "path_signal", "significant_growth", "MIN_BYTES_PER_STEP"]

#: retained bytes per step below which a path's growth is ignored
MIN_BYTES_PER_STEP = 2 * KiB
#: graph nodes per step below which a growing graph is ignored
MIN_COUNT_PER_STEP = 0.5
#: tensors-with-graph (or hooks) kept per step below which growth is ignored (1 in 20 steps)
MIN_GRAPHS_PER_STEP = 0.05
#: tensor bytes found in cyclic garbage at one boundary below which cycles are ignored
MIN_GARBAGE_BYTES = 64 * KiB


@dataclass
class GarbageRecord:
    """What one private ``gc.collect()`` at a boundary found in cyclic garbage."""

    step: int
    steps_since: int
    objects: int
    tensor_bytes: int
    freed_heap: int
    anchors: list[tuple[str, str, str | None, int | None, str | None]] = field(default_factory=list)
    # (description, culprit name, file, line, code) of user objects in the garbage


@dataclass
class GradCheck:
    """Gradient bookkeeping between two optimizer steps."""

    step: int
    accumulated: bool  # same .grad storages, version advanced only by backward passes
    zero_grad_calls: int
    backward_calls: int
    grad_bytes: int
    optimizer_name: str | None = None
    manual: bool = False  # no optimizer: parameters updated by hand
    file: str | None = None
    line: int | None = None
    code: str | None = None


@dataclass
class Evidence:
    """Everything the probe gathered, as plain data."""

    snapshots: list[Snapshot] = field(default_factory=list)
    backward_steps: int = 0
    retain_graph_steps: int = 0
    create_graph_steps: int = 0
    backward_site: tuple[str, int, str] | None = None
    grad_checks: list[GradCheck] = field(default_factory=list)
    garbage: list[GarbageRecord] = field(default_factory=list)
    empty_cache_steps: int = 0
    empty_cache_site: tuple[str, int, str] | None = None
    steps: int = 0
    allocator: dict[str, dict[str, Any]] = field(default_factory=dict)


def _rate(a: PathStats | None, b: PathStats, steps: int, attr: str) -> float:
    before = getattr(a, attr) if a is not None else 0
    return (getattr(b, attr) - before) / max(steps, 1)


def _signals(a: PathStats | None, b: PathStats, steps: int) -> dict[str, float]:
    return {
        "bytes": _rate(a, b, steps, "retained_bytes"),
        "grad_tensors": _rate(a, b, steps, "grad_tensors"),
        "nodes": _rate(a, b, steps, "graph_nodes"),
        "hooks": _rate(a, b, steps, "hooks"),
        "tensors": _rate(a, b, steps, "tensors"),
        "items": (((b.items or 0) - ((a.items or 0) if a else 0)) / max(steps, 1)),
    }


def _significant(sig: dict[str, float]) -> bool:
    return (sig["bytes"] >= MIN_BYTES_PER_STEP or sig["grad_tensors"] >= MIN_GRAPHS_PER_STEP
            or sig["hooks"] >= MIN_GRAPHS_PER_STEP
            or (sig["nodes"] >= MIN_COUNT_PER_STEP and sig["bytes"] >= 0))


#: the growth of one path between two snapshots, per step (bytes, tensors, graph nodes...)
path_signal = _signals
#: whether such a growth clears the thresholds above
significant_growth = _significant


def _score(sig: dict[str, float]) -> float:
    return max(sig["bytes"], 0.0) + 256.0 * max(sig["grad_tensors"] + sig["hooks"] + sig["nodes"], 0.0)


def _graphs(sig: dict[str, float]) -> bool:
    return sig["grad_tensors"] > 0 or sig["nodes"] > 0


def _dropped(sig: dict[str, float]) -> bool:
    return sig["bytes"] < 0 or sig["nodes"] < 0 or sig["grad_tensors"] < 0 or sig["items"] < 0


def _path_trend(snaps: Sequence[Snapshot], path: str) -> dict[str, float] | None:
    """The growth signal of ``path`` if it grows steadily, or grows again after each reset.

    Steady: it grew in the last interval and in the one before. Reset (an accumulator
    emptied each epoch): it holds autograd graphs, grew in the last interval (or the one
    before, when the last two snapshots fell on the same phase of the epoch), and an
    earlier interval shows the drop of a reset.
    """
    seq: list[dict[str, float] | None] = []
    for before, after in zip(snaps, snaps[1:]):
        a, b = before.paths.get(path), after.paths.get(path)
        seq.append(_signals(a, b, after.step - before.step) if a is not None and b is not None else None)
    if not seq or seq[-1] is None:
        return None
    last = seq[-1]
    prev = seq[-2] if len(seq) >= 2 else None
    drops = [i for i, sg in enumerate(seq) if sg is not None and _dropped(sg)]
    if _significant(last):
        if prev is None:
            return last if snaps[-1].step - snaps[-2].step >= 3 else None
        if _significant(prev) or (_score(prev) > 0 and _score(prev) >= 0.25 * _score(last)):
            return dict(last, resets=0.0)
        if _graphs(last) and drops and any(
                sg is not None and _significant(sg) and _graphs(sg) for sg in seq[:drops[-1]]):
            return dict(last, resets=float(len(drops)))
        return None
    if (prev is not None and _score(last) == 0 and not _dropped(last) and _significant(prev)
            and _graphs(prev) and drops and drops[-1] < len(seq) - 2):
        return dict(prev, resets=float(len(drops)))
    return None


def _growing_paths(snaps: Sequence[Snapshot]) -> dict[str, dict[str, float]]:
    """Paths that keep growing (see :func:`_path_trend`), with their growth signal."""
    out: dict[str, dict[str, float]] = {}
    for path in snaps[-1].paths:
        trend = _path_trend(snaps, path)
        if trend is not None:
            out[path] = trend
    return out


def _children(path: str, candidates: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> list[str]:
    depth = paths[path].depth
    return [p for p in candidates if paths[p].depth == depth + 1
            and p.startswith(path) and p[len(path):len(path) + 1] in (".", "[", ":")]


def _parent(path: str, growing: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> str | None:
    """The growing path one hop above ``path`` (None: it is where the growth starts)."""
    depth = paths[path].depth
    for p in growing:
        if paths[p].depth == depth - 1 and path.startswith(p) and path[len(p):len(p) + 1] in (".", "[", ":"):
            return p
    return None


def _roots(growing: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> list[str]:
    """Where growth starts: the growing variables, and growing entries or attributes of a
    variable that does not grow as a whole (the same name bound in two frames, or other
    entries dropped meanwhile); one per such variable, the fastest growing."""
    roots = [p for p in growing if paths[p].depth == 0]
    best: dict[str, str] = {}
    for path in growing:
        stats = paths[path]
        if stats.depth == 0 or _parent(path, growing, paths) is not None:
            continue
        if any(path.startswith(r) and path[len(r):len(r) + 1] in (".", "[", ":") for r in roots):
            continue  # below a growing variable: found by walking down from it
        key = stats.root
        if key not in best or _score(growing[path]) > _score(growing[best[key]]):
            best[key] = path
    return roots + list(best.values())


def _culprits(growing: dict[str, dict[str, float]], paths: dict[str, PathStats]) -> list[str]:
    chosen = []
    for path in _roots(growing, paths):
        current = path
        while True:
            kids = _children(current, growing, paths)
            best = max(kids, key=lambda k: _score(growing[k]), default=None)
            if best is None or _score(growing[best]) < 0.7 * _score(growing[current]):
                break
            current = best
        chosen.append(current)
    return chosen


def _files(stats: PathStats) -> list[str]:
    return [f for f in (stats.owner_file, stats.file) if f]


def _statement(stats: PathStats, want: str) -> Statement | None:
    hook = want == "hook"
    found = find_statements(stats.path, _files(stats), hook=hook)
    return best_statement(found, want, function=stats.function, exact=stats.path)


def _kind(stats: PathStats) -> str:
    if stats.kind == "hook":
        return "hook"
    if stats.kind == "closure":
        return "closure"
    if stats.depth == 0:
        return stats.kind
    return "container" if "[" in stats.path.rsplit(".", 1)[-1] else "attribute"


def _classify(stats: PathStats, sig: dict[str, float], ev: Evidence) -> str:
    flags = ev.backward_steps > 0 and (ev.retain_graph_steps + ev.create_graph_steps) >= 0.5 * ev.backward_steps
    if stats.kind == "hook" or sig["hooks"] >= MIN_GRAPHS_PER_STEP:
        return "growing_container"
    pinned_share = stats.pinned_bytes / stats.retained_bytes if stats.retained_bytes else 0.0
    if sig["grad_tensors"] >= MIN_GRAPHS_PER_STEP:
        if pinned_share >= 0.5:
            return "view_pins_storage"
        if flags:
            return "backward_flags_graph"
        if stats.live_nodes and stats.freed_nodes == 0 and stats.saved_bytes > 0:
            return "eval_graph"
        return "retained_graph"
    if sig["nodes"] >= MIN_COUNT_PER_STEP and sig["tensors"] <= 0:
        if stats.chain_numel == 1:  # a running scalar sum such as `total += loss`
            return "backward_flags_graph" if flags else "retained_graph"
        return "hidden_state_chain"
    if pinned_share >= 0.5:
        return "view_pins_storage"
    return "growing_container"


def _evidence_lines(cause: str, stats: PathStats, sig: dict[str, float], first_step: int,
                    last_step: int) -> list[str]:
    lines = []
    what = f"`{stats.path}` ({stats.type})"
    if stats.items is not None:
        lines.append(f"{what} holds {stats.items} items ({sig['items']:+.2f} per step)")
    if stats.tensors:
        ex = f"; largest {stats.example}" if stats.example else ""
        lines.append(f"reaches {stats.tensors} tensors ({stats.grad_tensors} with grad_fn) "
                     f"of {format_bytes(stats.storage_bytes)}{ex}")
    if stats.graph_nodes:
        lines.append(f"keeps {stats.graph_nodes} autograd nodes alive ({sig['nodes']:+.1f} per step) "
                     f"and {format_bytes(stats.saved_bytes)} of saved activations")
    if cause == "eval_graph":
        lines.append(f"{stats.live_nodes} of those nodes still hold their saved tensors: no "
                     "backward() ever ran through them")
    if cause == "hidden_state_chain":
        lines.append(f"one tensor reaches {stats.max_chain} graph nodes: each step's graph "
                     "links to the previous step's")
    if cause == "view_pins_storage":
        lines.append(f"the tensors use {format_bytes(stats.used_bytes)} but pin "
                     f"{format_bytes(stats.storage_bytes)} of storage")
    if stats.hooks:
        lines.append(f"{stats.hooks} hooks registered ({sig['hooks']:+.1f} per step)")
    if sig.get("resets"):
        lines.append("it is emptied now and then (e.g. each epoch) but grows again after each "
                     "reset: the peak grows with the epoch length")
    lines.append(f"measured at steps {first_step} and {last_step}: "
                 f"{format_bytes(stats.retained_bytes)} of tensor storage (tensors and saved "
                 f"activations) reachable at step {last_step}")
    return lines


def _path_findings(ev: Evidence, growth: dict[str, Growth]) -> list[Finding]:
    snaps = [s for s in ev.snapshots if s.paths]
    if len(snaps) < 2:
        return []
    return path_findings(ev, _growing_paths(snaps), snaps[-1].paths,
                         [s.step for s in snaps], growth)


def path_findings(ev: Evidence, growing: dict[str, dict[str, float]],
                  paths: dict[str, PathStats], snapshot_steps: Sequence[int],
                  growth: dict[str, Growth], *, eval_pass: bool = False) -> list[Finding]:
    """Findings for the paths that grow (``growing``: path -> growth signal per step),
    described by ``paths`` (their stats where they were largest). ``eval_pass``: the
    growth happened within evaluation passes where no backward ran, so a retained graph
    there is an evaluation graph."""
    findings = []
    first_step, last_step = snapshot_steps[-2], snapshot_steps[-1]
    for path in _culprits(growing, paths):
        stats, sig = paths[path], growing[path]
        cause = _classify(stats, sig, ev)
        if eval_pass and cause == "retained_graph":
            cause = "eval_graph"
        want = "hook" if cause == "growing_container" and (stats.kind == "hook" or sig["hooks"] > 0) else (
            "chain" if cause == "hidden_state_chain" or (sig["tensors"] <= 0 and sig["nodes"] > 0) else "container")
        if want == "chain" and cause != "hidden_state_chain" and stats.chain_numel == 1:
            want = "sum"  # one scalar whose graph grows: the `+=` that accumulates into it
        stmt = _statement(stats, want)
        if stmt is None and want == "chain":
            stmt = _statement(stats, "container")
        if cause == "retained_graph" and stmt is not None and stmt.kind == "assign" and stats.chain_numel != 1:
            cause = "hidden_state_chain"
        scalar = stats.example is not None and stats.example.startswith("() ")
        hooks = want == "hook"
        path_fix = fix_edit.path_fix(
            cause, path, stmt, holds=stats.holds, culprit_type=stats.type,
            has_graph=stats.grad_tensors > 0, scalar=scalar or stats.chain_numel == 1,
            is_tuple=stats.type in ("tuple", "list"), hook=hooks)
        fix = path_fix.text
        culprit = Culprit(name=path, kind=_kind(stats), file=stmt.file if stmt else stats.file,
                          line=stmt.line if stmt else None, code=stmt.code if stmt else None,
                          function=stmt.function if stmt else stats.function, type=stats.type)
        rate = max(sig["bytes"], 0.0)
        if cause == "eval_graph" and stmt is not None and stmt.value and stmt.value.isidentifier() \
                and path_fix.proposal.edit is None:
            # name the forward that built the graph: the assignment of the kept name
            found = [s for s in find_statements(stmt.value, [stmt.file]) if s.function == stmt.function]
            forward = best_statement(found, "chain")
            if forward is not None:
                fix = (f"run `{forward.code}` (line {forward.line}) under `with torch.no_grad():` "
                       f"(or `torch.inference_mode()`), or keep `{stmt.value}.detach()` at "
                       f"line {stmt.line}")
        end = max(ev.steps, last_step)
        at_end = int(stats.retained_bytes + rate * (end - last_step))
        data = {"items": stats.items, "tensors": stats.tensors, "grad_tensors": stats.grad_tensors,
                "graph_nodes": stats.graph_nodes, "saved_bytes": stats.saved_bytes,
                "live_nodes": stats.live_nodes, "freed_nodes": stats.freed_nodes,
                "hooks": stats.hooks, "example": stats.example,
                "storage_bytes": stats.storage_bytes, "used_bytes": stats.used_bytes,
                "nodes_per_step": round(sig["nodes"], 2), "items_per_step": round(sig["items"], 2),
                "tensor_bytes_per_step": round(rate, 1), "snapshot_steps": list(snapshot_steps),
                "bytes_at_snapshot": stats.retained_bytes, "end_step": end,
                "bytes_measure": "tensor_storage"}
        findings.append(Finding(
            cause=cause, title="hooks registered again every step" if hooks else TITLES[cause],
            device="cpu", bytes=at_end,
            bytes_per_step=round(rate, 1), culprit=culprit,
            evidence=tuple(_evidence_lines(cause, stats, sig, first_step, last_step)),
            data=data, fix=fix, confidence="high" if stmt is not None else "medium",
            fix_kind=path_fix.kind, edit=path_fix.proposal.edit,
            alternatives=path_fix.proposal.edits[1:]))
    memory = [f for f in findings]
    if len(memory) == 1 and "cpu" in growth and growth["cpu"].verdict == "growing":
        f = memory[0]
        if growth["cpu"].bytes_per_step > f.bytes_per_step:
            # The culprit explains the growth, but part of what it holds is not tensor
            # storage (autograd nodes, Python objects): the heap's measured growth is the
            # truer size of what is at stake.
            g = growth["cpu"]
            bytes_now = max(f.bytes, int(g.total_growth))
            note = (f"the C heap grew by {format_bytes(g.total_growth)} over steps "
                    f"{g.first_step}-{g.last_step} ({format_bytes(g.bytes_per_step)} per step), "
                    f"more than the tensor storage above: the rest is the autograd nodes and "
                    f"Python objects `{f.culprit.name if f.culprit else 'it'}` keeps alive, so "
                    f"this finding's size ({format_bytes(bytes_now)}, "
                    f"{format_bytes(g.bytes_per_step)}/step) is the heap's growth")
            findings[0] = _replace(f, bytes_per_step=g.bytes_per_step, bytes=bytes_now,
                                   evidence=f.evidence + (note,),
                                   data={**f.data, "heap_bytes_per_step": g.bytes_per_step,
                                         "heap_growth": g.total_growth, "bytes_measure": "heap"})
    return findings


def _replace(f: Finding, **changes: Any) -> Finding:
    from dataclasses import replace

    return replace(f, **changes)


def _cycle_findings(ev: Evidence) -> list[Finding]:
    hits = [g for g in ev.garbage if g.tensor_bytes >= MIN_GARBAGE_BYTES]
    if not hits or (len(hits) < 2 and len(ev.garbage) >= 2):
        return []
    last = hits[-1]
    per_step = sum(g.tensor_bytes for g in hits) / max(sum(g.steps_since for g in hits), 1)
    anchor = next((a for a in last.anchors if a[3]), last.anchors[0] if last.anchors else None)
    culprit = None
    if anchor is not None:
        culprit = Culprit(name=anchor[1], kind="cycle", file=anchor[2], line=anchor[3], code=anchor[4])
    evidence = [f"a collection at step {g.step} freed {g.objects} unreachable objects holding "
                f"{format_bytes(g.tensor_bytes)} of tensors ({g.steps_since} steps since the "
                f"previous one)" for g in hits[-2:]]
    evidence.append("these tensors were reachable only through reference cycles: they stay "
                    "alive until Python's cyclic garbage collector runs, not when the step ends")
    if last.anchors:
        evidence.append("in the garbage: " + "; ".join(a[0] for a in last.anchors[:4]))
    fix = fix_for("reference_cycle", "", None)
    if anchor is not None and anchor[0].startswith("exception"):
        held = anchor[0].split("`")[1] if "`" in anchor[0] else "it"
        fix = (f"do not keep the exception object: store `str(exc)` or "
               f"`traceback.format_exc()` in `{held}` instead, or `del {held}` before the "
               "function returns (the traceback's frames hold every local of the step)")
    elif anchor is not None and anchor[0].startswith("closure"):
        fix = ("the closure captures the object that stores it, which makes a cycle: make it a "
               "method, pass what it needs as arguments, or capture `weakref.ref(self)`; "
               "calling gc.collect() only hides it")
    return [Finding(cause="reference_cycle", title=TITLES["reference_cycle"], device="cpu",
                    bytes=last.tensor_bytes, bytes_per_step=round(per_step, 1), culprit=culprit,
                    evidence=tuple(evidence), fix=fix,
                    data={"garbage_objects": last.objects, "garbage_tensor_bytes": last.tensor_bytes,
                          "freed_heap": last.freed_heap},
                    confidence="high" if culprit and culprit.line else "medium")]


def _grad_findings(ev: Evidence) -> list[Finding]:
    checks = ev.grad_checks
    if len(checks) < 3:
        return []
    bad = [c for c in checks if c.accumulated and c.zero_grad_calls == 0]
    if len(bad) < 0.8 * len(checks):
        return []
    last = bad[-1]
    name = last.optimizer_name or ""
    culprit = Culprit(name=name or "gradients", kind="local", file=last.file, line=last.line,
                      code=last.code, type="parameters" if last.manual else "Optimizer")
    evidence = (f"between {len(bad)} of {len(checks)} consecutive optimizer steps the same "
                f".grad tensors kept accumulating and zero_grad() was never called",
                "memory does not grow (gradients are summed in place): the updates are wrong, "
                "each step applies the sum of all gradients so far")
    return [Finding(cause="grad_not_cleared", title=TITLES["grad_not_cleared"], device="cpu",
                    bytes=last.grad_bytes, bytes_per_step=0.0, culprit=culprit,
                    evidence=evidence,
                    fix=(f"clear the gradients after each update: `for p in {name}: p.grad = None` "
                         "(or `p.grad.zero_()`) before the next `backward()`" if last.manual
                         else fix_for("grad_not_cleared", name, None)),
                    data={"checks": len(checks), "accumulating": len(bad)}, confidence="high")]


def _cuda_findings(ev: Evidence, steps: int) -> list[Finding]:
    out: list[Finding] = []
    if steps >= 4 and ev.empty_cache_steps >= 0.8 * steps:
        site = ev.empty_cache_site
        stmt = Statement(site[0], site[1], site[2], "call", "", True) if site else None
        culprit = Culprit(name="torch.cuda.empty_cache", kind="unknown", file=site[0] if site else None,
                          line=site[1] if site else None, code=site[2] if site else None)
        device = next(iter(ev.allocator), "cuda:0")
        alloc = ev.allocator.get(device, {})
        evidence = [f"torch.cuda.empty_cache() ran in {ev.empty_cache_steps} of {steps} steps"]
        if alloc.get("device_allocs"):
            evidence.append(f"{alloc['device_allocs']} cudaMalloc and {alloc.get('device_frees', 0)} "
                            f"cudaFree calls by step {alloc.get('last_step')}: the cache is "
                            "refilled from the driver after every flush")
        out.append(Finding(cause="cache_thrash", title=TITLES["cache_thrash"],
                           device=device, culprit=culprit,
                           evidence=tuple(evidence),
                           fix=fix_for("cache_thrash", "", stmt), confidence="high",
                           data={"empty_cache_steps": ev.empty_cache_steps}))
    for device, stats in ev.allocator.items():
        if stats.get("verdict") == "fragmented":
            advice = stats.get("advice") or []
            out.append(Finding(cause="fragmentation", title=TITLES["fragmentation"], device=device,
                               bytes=int(stats.get("inactive_split", 0)),
                               culprit=Culprit(name="CUDA caching allocator", kind="unknown"),
                               evidence=tuple(stats.get("evidence", ())),
                               fix=" ".join(advice) or fix_for("fragmentation", "", None),
                               data={k: v for k, v in stats.items() if k not in ("evidence", "advice")},
                               confidence="medium"))
    return out


def diagnose(ev: Evidence, growth: Sequence[Growth] = ()) -> list[Finding]:
    """All findings from the evidence, largest bytes first (ties in :data:`CAUSES` order).

    Args:
        ev: what the probe gathered.
        growth: growth verdicts per device (used to attribute the measured slope).

    Returns:
        Findings; empty when nothing is wrong.
    """
    by_device = {g.device: g for g in growth}
    findings = _path_findings(ev, by_device) + _cycle_findings(ev) + _grad_findings(ev)
    findings += _cuda_findings(ev, ev.steps)
    findings = [f if f.fix_kind or not f.fix else _replace(f, fix_kind="advice") for f in findings]
    findings.sort(key=lambda f: (-f.bytes_per_step, -f.bytes, CAUSES.index(f.cause)))
    return findings
