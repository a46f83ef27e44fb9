"""Turn the doctor's evidence into ranked findings: cause, culprit, bytes, proof and fix.

Evidence comes from :class:`Evidence`, filled by the probe while the script runs:
per-path snapshots at a few step boundaries (:mod:`torchmem.doctor.culprit`), the
backward flags seen each step, gradient checks, what private garbage collections found,
``empty_cache`` calls and allocator statistics. Classification uses what the objects
*are*, never their names:

* a path whose tensors-with-``grad_fn`` count grows -> ``retained_graph``; if those
  graphs still hold their saved tensors (never backpropagated) -> ``eval_graph``; if
  most of the bytes are storage the views do not use -> ``view_pins_storage``; if the
  steps ran ``backward(create_graph=True)``, or ``backward(retain_graph=True)`` started from
  the tensors kept there -> ``backward_flags_graph`` (kept tensors that no retained
  backward started from stay ``retained_graph``: :mod:`torchmem.doctor.backward_roots`);
* a path whose tensor count stays the same but whose reachable graph grows -> one
  tensor chains the steps: ``hidden_state_chain`` (a running scalar sum such as
  ``total += loss`` is a ``retained_graph``);
* detached tensors accumulating -> ``growing_container`` (or ``view_pins_storage``);
  module hook dicts that grow -> ``growing_container`` of hooks;
* tensors found only in cyclic garbage -> ``reference_cycle``;
* gradients accumulated across optimizer steps with no clearing -> ``grad_not_cleared``;
* CUDA: inactive split blocks -> ``fragmentation``; ``empty_cache`` every step ->
  ``cache_thrash`` (those and the two above: :mod:`torchmem.doctor.record_findings`);
* leaves kept by their own ``.grad`` after ``backward(create_graph=True)`` ->
  ``backward_flags_graph``; heap growth that nothing in Python explains ->
  ``untracked_growth`` (:mod:`torchmem.doctor.held`);
* heap growth with flat tensor storage that a container of Python objects (floats,
  numpy arrays) explains -> ``growing_container`` (:mod:`torchmem.doctor.object_growth`);
* a variable's old values kept alive by autograd graphs that no variable reaches (a cycle
  inside autograd's C++) -> ``reference_cycle`` (:mod:`torchmem.doctor.autograd_held`).

Which paths count as growing, and which path along a growing variable is named, is
:mod:`torchmem.doctor.path_trend`; the evidence records are :mod:`torchmem.doctor.evidence`;
all mechanisms together, ranked: :mod:`torchmem.doctor.diagnosis`.
"""

from __future__ import annotations

from typing import Any, Sequence

from torchmem.doctor import edits as fix_edit
from torchmem.doctor.call_sites import caller_statement, shared_method
from torchmem.doctor.chained_attrs import chained_attribute, chained_text
from torchmem.doctor.culprit import PathStats
from torchmem.doctor.evidence import Evidence, GarbageRecord, GradCheck
from torchmem.doctor.fixes import TITLES
from torchmem.doctor.held import grad_path_finding
from torchmem.doctor.internals import binding_statement, internal_owner
from torchmem.doctor.list_ends import at_end, growing_end
from torchmem.doctor.lru_caches import cache_finding
from torchmem.doctor.path_trend import (
    MIN_BYTES_PER_STEP,
    MIN_COUNT_PER_STEP,
    MIN_GRAPHS_PER_STEP,
    culprit_paths,
    hook_owner,
    path_signal,
    significant_growth,
)
from torchmem.doctor.rebind_sources import filled_from
from torchmem.doctor.shared_targets import setitem_site, sibling_refusal, whole_container_refusal
from torchmem.doctor.key_origin import key_origin, last_key
from torchmem.doctor.object_growth import collected_outputs
from torchmem.doctor.path_evidence import evidence_lines
from torchmem.doctor.stale_hooks import kept_handles, stale_hook_list
from torchmem.doctor.source import Statement, find_statements
from torchmem.doctor.statement_rank import best_statement
from torchmem.doctor.value_kinds import objects_only
from torchmem.model.capture import Culprit, Finding, Growth
from torchmem.units import format_bytes

__all__ = ["Evidence", "GarbageRecord", "GradCheck", "path_findings",
           "path_signal", "significant_growth", "MIN_BYTES_PER_STEP", "MIN_COUNT_PER_STEP"]


#: causes whose culprit holds autograd graphs
_GRAPH_CAUSES = ("retained_graph", "hidden_state_chain", "eval_graph")


def _files(stats: PathStats) -> list[str]:
    return [f for f in (stats.owner_file, stats.file) if f]


def _statement(stats: PathStats, want: str, end: str | None = None,
               near: tuple[str, int] | None = None, replaced: bool = False) -> Statement | None:
    hook = want == "hook"
    local = stats.function if stats.kind == "local" else None
    found = at_end(find_statements(stats.path, _files(stats), hook=hook,
                                   hook_names=stats.hook_names, hook_methods=stats.hook_methods,
                                   local_to=local), end)
    return best_statement(found, want, function=stats.function, exact=stats.path,
                          brings_graph=want == "chain" and stats.passes > 0, near=near,
                          replaced=replaced)


def _kind(stats: PathStats) -> str:
    if stats.kind == "hook":
        return "hook"
    if internal_owner(stats.path) is not None:
        return "container"
    if stats.kind == "closure":
        return "closure"
    if stats.depth == 0:
        return stats.kind
    return "container" if "[" in stats.path.rsplit(".", 1)[-1] else "attribute"


def _flagged(stats: PathStats, ev: Evidence) -> bool:
    """Whether the backward flags are why the graphs kept at ``stats`` hold their saved
    tensors: ``create_graph=True`` made them, or what is kept is a tensor that a
    ``backward(retain_graph=True)`` started from (:mod:`torchmem.doctor.backward_roots`).
    A kept tensor that no backward started from holds its graph because it is kept."""
    return bool(ev.create_graph_steps) or ev.retained_roots.get(stats.path, 0) > 0


def _never_backpropagated(stats: PathStats) -> bool:
    """The graphs kept at ``stats`` still hold their saved tensors: no backward ran
    through them (an evaluation under grad)."""
    return bool(stats.live_nodes) and stats.freed_nodes == 0 and stats.saved_bytes > 0


def _concatenated(stats: PathStats, sig: dict[str, float]) -> bool:
    """One tensor (the same count) whose own storage grows with its graph: each step's
    output is joined onto it (``feats = torch.cat((feats, out))``), so it keeps every
    step's graph, not a hidden state of fixed size chained through the steps."""
    return sig.get("storage", 0.0) > 0 and stats.tensors == 1


def _classify(stats: PathStats, sig: dict[str, float], ev: Evidence) -> str:
    flags = ev.backward_steps > 0 and (ev.retain_graph_steps + ev.create_graph_steps) >= 0.5 * ev.backward_steps
    if stats.kind == "grad":  # a parameter's .grad with a graph: only create_graph makes one
        return "backward_flags_graph" if ev.create_graph_steps else "retained_graph"
    if stats.kind == "hook" or sig["hooks"] >= MIN_GRAPHS_PER_STEP:
        return "growing_container"
    pinned_share = stats.pinned_bytes / stats.retained_bytes if stats.retained_bytes else 0.0
    if sig["grad_tensors"] >= MIN_GRAPHS_PER_STEP:
        if pinned_share >= 0.5:
            return "view_pins_storage"
        if flags:  # retained backwards leave the nodes they ran through looking unused
            return "backward_flags_graph" if _flagged(stats, ev) else "retained_graph"
        if _never_backpropagated(stats):
            return "eval_graph"
        return "retained_graph"
    if sig["nodes"] >= MIN_COUNT_PER_STEP and sig["tensors"] <= 0:
        if stats.chain_numel == 1:  # a running scalar sum such as `total += loss`
            return "backward_flags_graph" if flags and _flagged(stats, ev) else "retained_graph"
        if _concatenated(stats, sig):  # every step's output joined on: all their graphs
            return "eval_graph" if _never_backpropagated(stats) else "retained_graph"
        return "hidden_state_chain"
    if pinned_share >= 0.5:
        return "view_pins_storage"
    return "growing_container"


def _graphs_outweigh_views(cause: str, sig: dict[str, float], heap: Growth | None) -> bool:
    """A growing path classified ``view_pins_storage`` whose tensors carry graphs, while
    the heap grows at least twice as fast as their storage (the one culprit of the run):
    the graphs, not the pinned storage, are most of what is kept (a scalar loss that is a
    view of its elementwise buffer, kept with its graph in a log)."""
    return (cause == "view_pins_storage" and sig["grad_tensors"] >= MIN_GRAPHS_PER_STEP
            and heap is not None and heap.verdict == "growing"
            and heap.bytes_per_step >= 2 * max(sig["bytes"], 1.0))


def path_findings(ev: Evidence, growing: dict[str, dict[str, float]],
                  paths: dict[str, PathStats], snapshot_steps: Sequence[int],
                  growth: dict[str, Growth], *, eval_pass: bool = False,
                  peaks: dict[str, int] | None = None) -> list[Finding]:
    """Findings for the paths that grow (``growing``: path -> growth signal per step),
    described by ``paths`` (their stats where they were largest). ``eval_pass``: the
    growth happened within evaluation passes where no backward ran, so a retained graph
    there is an evaluation graph. ``peaks``: for paths emptied now and then, the step
    whose stats ``paths`` holds (where they were largest) when it is not the last one."""
    findings = []
    first_step, last_step = snapshot_steps[-2], snapshot_steps[-1]
    culprits = culprit_paths(growing, paths)
    for path in culprits:
        stats, sig = paths[path], growing[path]
        cause = _classify(stats, sig, ev)
        graphs_outweigh = len(culprits) == 1 and _graphs_outweigh_views(cause, sig, growth.get("cpu"))
        if graphs_outweigh:
            cause = "retained_graph"
        if eval_pass and cause == "retained_graph":
            cause = "eval_graph"
        want = "hook" if cause == "growing_container" and (stats.kind == "hook" or sig["hooks"] > 0) else (
            "chain" if cause == "hidden_state_chain" or (sig["tensors"] <= 0 and sig["nodes"] > 0) else "container")
        if want == "chain" and cause != "hidden_state_chain" and stats.chain_numel == 1:
            want = "sum"  # one scalar whose graph grows: the `+=` that accumulates into it
        owner = internal_owner(path)
        owner_type = paths[owner].type if owner is not None and owner in paths else None
        # an object holding a chain: the attribute its own method rebinds (`self.sum += v`)
        chained = chained_attribute(path, stats, _files(stats)) if cause in _GRAPH_CAUSES else None
        name = chained[0] if chained else path
        stmt = chained[1] if chained else binding_statement(
            path, _files(stats), stats.function, owner_type) or _statement(
            stats, want, growing_end(ev.snapshots, path),
            ev.snapshots[-1].site if ev.snapshots else None,
            replaced=want in ("chain", "sum") and stats.items is not None and sig["items"] == 0)
        if stmt is None and want == "chain":
            stmt = _statement(stats, "container")
        if cause == "retained_graph" and stmt is not None and stmt.kind == "assign" \
                and stats.chain_numel != 1 and owner is None and not _concatenated(stats, sig):
            cause = "hidden_state_chain"
        if collected_outputs(cause, stats, stmt, ev):
            continue
        rebound = stmt if want == "container" and stmt is not None and owner is None else None
        filled = filled_from(rebound, _files(stats)) if rebound is not None else None
        stmt = filled or stmt  # `self.kept = other.results`: the line that fills it
        scalar = stats.example is not None and stats.example.startswith("() ")
        hooks = want == "hook"
        path_fix = fix_edit.path_fix(
            cause, path, stmt, holds=stats.holds, culprit_type=stats.type,
            has_graph=stats.grad_tensors > 0, scalar=scalar or stats.chain_numel == 1,
            is_tuple=stats.type in ("tuple", "list"), hook=hooks, owner_type=owner_type,
            refusal=sibling_refusal(path, stmt, paths) or whole_container_refusal(path, stmt, paths))
        fix = path_fix.text
        # what grows is the state of the optimizers it keeps (each one's first step makes
        # it, with its parameters' gradients): no container edit frees that
        optimizers = cause == "growing_container" and 0 < stats.storage_bytes <= 2 * stats.optimizer_bytes
        if optimizers:
            fix = (f"let go of each model and its optimizer when it is done with: remove it "
                   f"from `{path}` (save its `state_dict()` if it is needed later), or free "
                   "what its training made: `optimizer.state.clear()` and "
                   "`optimizer.zero_grad(set_to_none=True)`")
        chain_note = chained_text(path, name, stmt, stats) if chained and stmt is not None else None
        if chain_note is not None:
            fix = chain_note[1]
        # the statement sits in a helper that keeps what it is handed: the line is the
        # call that hands the values over (the fix still edits the helper's statement),
        # when the values are tensors, which the caller can detach or reduce; objects
        # (a data loader, a module) only the keeping statement can stop keeping
        handed_over = not (stmt is None or hooks or stats.kind == "grad" or (
            cause == "growing_container" and objects_only(stats.holds)))
        site, passed_through = (caller_statement(stmt, _files(stats), _receiver(path, stmt))
                                or (None, [])) if handed_over else (None, [])
        if site is None and handed_over and path_fix.proposal.edit is None:
            site = setitem_site(path, stmt, _files(stats))  # `stat_col['loss'] = loss`
            if site is not None:
                path_fix = fix_edit.path_fix(
                    cause, path, site, holds=stats.holds, culprit_type="Tensor",
                    has_graph=stats.grad_tensors > 0, scalar=scalar, is_tuple=False,
                    hook=False, owner_type=owner_type)
                fix = path_fix.text
        if site is not None and site.kind == "call" and stats.holds \
                and set(stats.holds) <= {"tensor", "0-dim tensor"} \
                and shared_method(stmt, _files(stats)):
            # a method every caller's values go through (a meter's `update` given floats
            # too): the edit goes at this object's call, where the tensor is handed in
            path_fix = fix_edit.path_fix(
                cause, path, site, holds=stats.holds, culprit_type="Tensor",
                has_graph=stats.grad_tensors > 0, scalar=scalar, is_tuple=False, hook=False,
                owner_type=owner_type)
            fix = path_fix.text
        # a dict handed over: the line that put the kept key's value into it
        origin = key_origin(site, path, _files(stats)) if site is not None else None
        if origin is not None and origin.value is not None and stats.holds \
                and set(stats.holds) <= {"tensor", "0-dim tensor"}:  # the edit goes there too
            path_fix = fix_edit.path_fix(
                cause, path, origin, holds=stats.holds, culprit_type="Tensor",
                has_graph=stats.grad_tensors > 0, scalar=scalar, is_tuple=False, hook=False,
                owner_type=owner_type)
            fix = path_fix.text
        shown = origin or site or stmt
        # hooks left registered that keep appending: the list they append to, at its append
        stale = stale_hook_list([p for p in growing if paths[p].kind == "hook" and paths[p].root
                                 == stats.root], ev.snapshots, _files(stats)) if hooks else None
        if stale is not None:
            name, shown = stale[0], stale[1]
        kept = kept_handles(path, ev.snapshots, _files(stats)) if hooks and stale is None else None
        if kept is not None:  # the handles are kept: the removal through them does not run
            name, shown = kept[0], kept[1] or shown
        culprit = Culprit(name=name, kind=_kind(stats), file=shown.file if shown else stats.file,
                          line=shown.line if shown else None, code=shown.code if shown else None,
                          function=shown.function if shown else stats.function,
                          type=None if stale or kept else stats.type)
        extra_evidence: tuple[str, ...] = (chain_note[0],) if chain_note is not None else ()
        if optimizers:
            extra_evidence += (f"{format_bytes(stats.optimizer_bytes)} of it is optimizer state "
                               f"and gradients: each optimizer's first step creates them, and "
                               f"`{path}` keeps every optimizer that has stepped",)
        if site is not None and stmt is not None:
            via = "".join(f", through `{c.code}` (line {c.line}, in `{c.function}`)"
                          for c in reversed(passed_through))
            extra_evidence += (f"`{stmt.code}` (line {stmt.line}, in `{stmt.function}`) keeps what "
                               f"it is handed: the values come from `{site.code}` (line "
                               f"{site.line}){via}",)
        if origin is not None and site is not None:
            extra_evidence += (f"`{origin.code}` (line {origin.line}, in `{origin.function}`) "
                               f"puts the value kept under `{last_key(path)}` into "
                               f"`{site.value}`: there it can be detached or reduced",)
        if stale is not None:
            extra_evidence += (f"`{stale[1].code}` (line {stale[1].line}, in `{stale[1].function}`) "
                               f"appends at every forward of a hook left registered in "
                               f"`{stale[0][:stale[0].rindex('[')]}`: "
                               f"`{stale[0]}` gained {stale[2]} items between steps "
                               f"{first_step} and {last_step}",)
        if kept is not None:
            extra_evidence += (f"`{kept[0]}` keeps a handle for each of those hooks ({kept[2]} "
                               f"at step {last_step}, as many as `{path}` holds): they were "
                               f"meant to be removed through it, and the code that removes "
                               f"them does not run for these",)
        spread = hook_owner(path, growing, paths) if hooks else None
        if spread is not None:
            owner_path, dicts = spread
            extra_evidence += (f"`{owner_path}` (with its sub-modules) gains "
                               f"{growing[owner_path]['hooks']:+.1f} hooks per step in all, "
                               f"spread over {dicts} hook dicts ({paths[owner_path].hooks} hooks "
                               f"at step {last_step})",)
        if filled is not None and rebound is not None:
            extra_evidence += (f"`{rebound.code}` (line {rebound.line}, in `{rebound.function}`) "
                               f"only binds `{path}` to what `{filled.code}` (line {filled.line}, "
                               f"in `{filled.function}`) filled",)
        if graphs_outweigh:
            extra_evidence += (f"the tensors kept are views that pin {format_bytes(stats.pinned_bytes)}"
                               f" of storage, but the heap grows {growth['cpu'].bytes_per_step / max(sig['bytes'], 1.0):.1f}"
                               " times faster than their storage: most of what is kept is "
                               "the autograd graph each of them carries",)
        if stats.kind == "grad":
            culprit, fix, line = grad_path_finding(stats, ev.create_graph_site or ev.backward_site)
            extra_evidence, stmt = (line,), None
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
        # emptied now and then: what it held at its largest, not a line through resets
        at_end = int(stats.retained_bytes + (0 if path in (peaks or {}) else rate * (end - last_step)))
        data = {"items": stats.items, "tensors": stats.tensors, "grad_tensors": stats.grad_tensors,
                "graph_nodes": stats.graph_nodes, "saved_bytes": stats.saved_bytes,
                "live_nodes": stats.live_nodes, "freed_nodes": stats.freed_nodes,
                "hooks": stats.hooks, "example": stats.example,
                "storage_bytes": stats.storage_bytes, "used_bytes": stats.used_bytes,
                "nodes_per_step": round(sig["nodes"], 2), "items_per_step": round(sig["items"], 2),
                "tensor_bytes_per_step": round(rate, 1), "snapshot_steps": list(snapshot_steps),
                "bytes_at_snapshot": stats.retained_bytes, "end_step": end,
                "bytes_measure": "tensor_storage"}
        if stats.kind == "grad":
            data["path_kind"] = "grad"
        findings.append(cache_finding(Finding(
            cause=cause, title=("hooks left registered keep appending" if stale else
                                "hooks registered again every step") if hooks else TITLES[cause],
            device="cpu", bytes=at_end,
            bytes_per_step=round(rate, 1), culprit=culprit,
            evidence=extra_evidence + tuple(evidence_lines(
                cause, stats, sig, first_step, last_step, owner_type, (peaks or {}).get(path))),
            data=data, fix=fix,
            confidence="high" if stmt is not None or culprit.line is not None else "medium",
            fix_kind="advice" if stats.kind == "grad" or optimizers else path_fix.kind,
            edit=None if stats.kind == "grad" or optimizers else path_fix.proposal.edit,
            alternatives=() if stats.kind == "grad" or optimizers else path_fix.proposal.edits[1:]),
            stats.cache))
    memory = [f for f in findings]
    if len(memory) == 1 and "cpu" in growth and growth["cpu"].verdict == "growing":
        f = memory[0]
        if growth["cpu"].bytes_per_step > f.bytes_per_step:
            # The culprit explains the growth, but part of what it holds is not tensor
            # storage (autograd nodes, Python objects): the heap's measured growth is the
            # truer size of what is at stake.
            g = growth["cpu"]
            bytes_now = max(f.bytes, int(g.total_growth))
            span = (f"within each of {g.stretches} stretches of steps {g.first_step}-{g.last_step}"
                    if g.stretches else f"over steps {g.first_step}-{g.last_step}")
            note = (f"the C heap grew by {format_bytes(g.total_growth)} {span} "
                    f"({format_bytes(g.bytes_per_step)} per step), "
                    f"more than the tensor storage above: the rest is the autograd nodes and "
                    f"Python objects `{f.culprit.name if f.culprit else 'it'}` keeps alive, so "
                    f"this finding's size ({format_bytes(bytes_now)}, "
                    f"{format_bytes(g.bytes_per_step)}/step) is the heap's growth")
            findings[0] = _replace(f, bytes_per_step=g.bytes_per_step, bytes=bytes_now,
                                   evidence=f.evidence + (note,),
                                   data={**f.data, "heap_bytes_per_step": g.bytes_per_step,
                                         "heap_growth": g.total_growth, "bytes_measure": "heap",
                                         "own_bytes": f.bytes})
    return findings


def _receiver(path: str, stmt: Statement | None) -> str | None:
    """The object whose state the culprit is, when ``stmt`` writes it through ``self``:
    ``losses`` for the culprit ``losses.sum`` kept by ``self.sum += val * n``."""
    target = stmt.target if stmt is not None else None
    if not target or not target.startswith("self.") or not path.endswith(target[4:]):
        return None
    return path[:len(path) - len(target) + 4] or None


def _replace(f: Finding, **changes: Any) -> Finding:
    from dataclasses import replace

    return replace(f, **changes)
