"""Findings for memory held where no variable of the script grows.

Three mechanisms, each decided from what the snapshots measured
(:class:`~torchmem.doctor.pathstats.Unreached`, paths of kind ``grad``), never from names:

* **leaves in ``.grad`` cycles** (``backward_flags_graph``): ``backward(create_graph=True)``
  gives each leaf a ``.grad`` whose graph leads back to the leaf. When the script drops
  the leaf, the cycle keeps it, its gradient and the graph alive (C++ references:
  ``gc.collect()`` does not free them). Found as live leaves that no walked path reaches,
  whose gradient has a ``grad_fn``, and whose number grows between snapshots. They are
  named by the name they had where ``backward()`` ran.
* **a parameter's ``.grad`` carrying a graph** (``backward_flags_graph``): the same
  backward accumulates a gradient *with its graph* into ``net.weight.grad``; if nothing
  clears it, each step's graph is chained onto the last. Found as a ``grad`` path whose
  graph grows (the path finding of :mod:`torchmem.doctor.causes`; its text is built here).
* **growth no Python path explains** (``untracked_growth``): the heap grows steadily
  while no path, no unreached tensor and no container explains it. The report says so,
  with the evidence (heap vs tensor bytes, Python objects) and, where measured, what
  ran each step: a call that keeps what it builds in C++ (``torch.jit.trace``), or a
  parameter whose gradient is the size of each step's growth.
"""

from __future__ import annotations

import ast
from typing import Any, Sequence

from torchmem.doctor.pathstats import PathStats, Snapshot, Unreached
from torchmem.model.capture import Culprit, Finding, Growth
from torchmem.units import KiB, format_bytes

__all__ = ["grad_cycle_findings", "grad_path_finding", "merge_grad_findings",
           "untracked_findings", "TITLE_UNTRACKED",
           "MIN_UNTRACKED_PER_STEP"]

TITLE_UNTRACKED = "memory that no Python variable holds"
#: heap growth per step below which growth nothing explains is not reported
MIN_UNTRACKED_PER_STEP = 8 * KiB
#: the heap's fit must be at least this good for growth nothing explains
MIN_UNTRACKED_R2 = 0.9
#: a per-step call explains growth when it ran in at least this share of the steps
MIN_CALL_SHARE = 0.8
#: a gradient's size matches the growth per step within this relative tolerance
GRAD_SIZE_TOLERANCE = 0.1


def _with(snaps: Sequence[Snapshot]) -> list[tuple[int, Unreached]]:
    return [(s.step, s.unreached) for s in snaps if s.unreached is not None]


def _backward_call(code: str) -> tuple[str, str | None] | None:
    """(output expression, gradient argument) of ``out.backward(grad, create_graph=True)``."""
    try:
        tree = ast.parse(code.strip().rstrip(":"), mode="exec")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "backward":
            out = ast.get_source_segment(code.strip(), node.func.value)
            grad = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg in ("gradient", "grad_tensors")), None)
            shown = ast.get_source_segment(code.strip(), grad) if grad is not None else None
            return (out, shown) if out else None
    return None


def _autograd_grad(site: tuple[str, int, str] | None, inputs: str) -> str:
    """``torch.autograd.grad(out, inputs, grad_outputs=g, create_graph=True)[0]`` for the
    backward at ``site``, or a generic form."""
    call = _backward_call(site[2]) if site else None
    if call is None:
        return f"torch.autograd.grad(output, {inputs}, create_graph=True)"
    out, grad = call
    extra = f", grad_outputs={grad}" if grad else ""
    return f"torch.autograd.grad({out}, {inputs}{extra}, create_graph=True)"


def _growing(values: list[int]) -> bool:
    """Grew in the last interval and in the one before (one interval: it grew)."""
    if len(values) < 2 or values[-1] <= values[-2]:
        return False
    return len(values) == 2 or values[-2] > values[-3]


def grad_cycle_findings(snaps: Sequence[Snapshot], create_graph_site: tuple[str, int, str] | None,
                        end_step: int) -> list[Finding]:
    """Leaves kept by ``tensor -> .grad -> grad_fn -> tensor`` cycles, when their number grows."""
    series = _with(snaps)
    counts = [u.grad_cycles for _, u in series]
    if not _growing(counts) or counts[-1] < 2:
        return []
    (first_step, first), (last_step, last) = series[0], series[-1]
    steps = max(last_step - first_step, 1)
    per_step = max((last.grad_cycle_bytes - first.grad_cycle_bytes) / steps, 0.0)
    names = sorted(last.grad_cycle_names.items(), key=lambda kv: -kv[1])
    name = names[0][0] if names else None
    site = create_graph_site
    where = f"line {site[1]} (`{site[2]}`)" if site else "a `backward(create_graph=True)` call"
    evidence = [
        f"{last.grad_cycles} leaf tensors are alive at step {last_step} ({first.grad_cycles} at "
        f"step {first_step}) although no variable of the script reaches them; each has a "
        f"`.grad` that carries a `grad_fn` ({format_bytes(last.grad_cycle_bytes)} of tensors "
        "and gradients)",
        f"they are leaves of `backward(create_graph=True)` at {where}: the gradient's graph "
        "leads back to the tensor (tensor -> .grad -> grad_fn -> tensor), a cycle inside "
        "autograd that neither reference counting nor gc.collect() frees",
    ]
    if names:
        evidence.append("named by the variable that held them where backward() ran or at "
                        "an earlier analysis step: " + ", ".join(
            f"`{n}` ({c})" for n, c in names[:4]))
    held_in = name is not None and name.endswith("[...]")  # a tensor inside that container
    shown = "the leaf" if name is None else name[:-len("[...]")] if held_in else name
    if held_in:
        fix = (f"set `.grad = None` on the tensors in `{shown}` once their gradients have been "
               f"used, or compute the gradients with `torch.autograd.grad(..., "
               f"create_graph=True)` instead of `.backward(create_graph=True)`"
               f"{f' (line {site[1]})' if site else ''} and use what it returns")
    else:
        fix = (f"compute the gradient with `{_autograd_grad(site, shown)}[0]` instead of "
               f"`.backward(create_graph=True)`{f' (line {site[1]})' if site else ''} and use "
               f"what it returns, or set `{shown}.grad = None` once its gradient has been used")
    # what a user would write: the leaf's `.grad`, or the container that holds the leaf
    label = None if name is None else shown if held_in else f"{name}.grad"
    culprit = Culprit(name=label or "leaf tensors of backward(create_graph=True)",
                      kind="unknown" if name is None else "container" if held_in else "local",
                      file=site[0] if site else None,
                      line=site[1] if site else None, code=site[2] if site else None,
                      type=None if held_in else "Tensor")
    at_end = int(last.grad_cycle_bytes + per_step * max(end_step - last_step, 0))
    return [Finding(
        cause="backward_flags_graph", title="tensors kept by their own .grad (create_graph=True)",
        device="cpu", bytes=at_end, bytes_per_step=round(per_step, 1), culprit=culprit,
        evidence=tuple(evidence), fix=fix, confidence="high" if name and site else "medium",
        data={"grad_cycles": last.grad_cycles, "grad_cycle_bytes": last.grad_cycle_bytes,
              "snapshot_steps": [s for s, _ in series], "grad_cycles_at": counts,
              "names": dict(names), "bytes_measure": "tensor_storage"})]


def grad_path_finding(stats: PathStats,
                      site: tuple[str, int, str] | None) -> tuple[Culprit, str, str]:
    """Culprit, fix and one evidence line for a parameter's ``.grad`` whose graph grows."""
    param = stats.path[: -len(".grad")] if stats.path.endswith(".grad") else stats.path
    culprit = Culprit(name=stats.path, kind="attribute", file=site[0] if site else stats.file,
                      line=site[1] if site else None, code=site[2] if site else None,
                      function=stats.function, type="Tensor")
    where = f" (line {site[1]})" if site else ""
    fix = (f"`backward(create_graph=True)`{where} accumulates a gradient *with its graph* into "
           f"`{stats.path}`: get the gradients of the `inputs` you differentiate again with "
           f"`{_autograd_grad(site, 'inputs')}` (it leaves `.grad` alone), or clear it with "
           f"`{param}.grad = None` (or `zero_grad()`) before the next backward")
    evidence = (f"`{stats.path}` has a `grad_fn`: {stats.passes} forward passes through "
                f"`{param}` are chained in its graph ({stats.graph_nodes} nodes), one more "
                "each time a gradient is accumulated into it")
    return culprit, fix, evidence


def merge_grad_findings(findings: list[Finding]) -> list[Finding]:
    """One finding for the ``.grad`` paths of one backward: the largest, naming the others."""
    grads = [f for f in findings if f.culprit is not None and f.culprit.name.endswith(".grad")
             and f.data.get("path_kind") == "grad"]
    if len(grads) < 2:
        return findings
    from dataclasses import replace

    keep = max(grads, key=lambda f: (f.bytes_per_step, f.data.get("graph_nodes", 0)))
    others = [f.culprit.name for f in grads if f is not keep and f.culprit is not None]
    merged = replace(keep, evidence=keep.evidence + (
        "the same holds for " + ", ".join(f"`{n}`" for n in others[:6])
        + (f" and {len(others) - 6} more" if len(others) > 6 else ""),))
    return [merged if f is keep else f for f in findings if f not in grads or f is keep]


def _paths_grew(snaps: Sequence[Snapshot]) -> list[str]:
    """Paths whose items, tensors or graph nodes grew from the first snapshot to the last
    (any rate a path finding would weigh): Python-side growth, even if it is not steady."""
    if len(snaps) < 2:
        return []
    first, last = snaps[0], snaps[-1]
    span = max(last.step - first.step, 1)
    out = []
    for path, stats in last.paths.items():
        before = first.paths.get(path)
        if before is None:
            continue
        if ((stats.items or 0) - (before.items or 0)) / span >= 0.05 \
                or (stats.tensors - before.tensors) / span >= 0.05 \
                or (stats.graph_nodes - before.graph_nodes) / span >= 0.5:
            out.append(path)
    return out


def _grad_match(unreached: Unreached, per_step: float) -> tuple[str, int, str] | None:
    """The one parameter whose gradient is the size of the growth per step (or None)."""
    hits = [(path, nbytes, layout) for path, (nbytes, layout) in unreached.param_grads.items()
            if nbytes and abs(nbytes - per_step) <= GRAD_SIZE_TOLERANCE * nbytes]
    return hits[0] if len(hits) == 1 else None


def untracked_findings(snaps: Sequence[Snapshot], growth: Growth | None, steps: int,
                       call_steps: dict[str, int], call_sites: dict[str, tuple[str, int, str]],
                       backward_site: tuple[str, int, str] | None,
                       explained: bool) -> list[Finding]:
    """Heap growth that no path, no unreached tensor and no container explains."""
    if explained or growth is None or growth.verdict != "growing" or growth.stretches:
        return []  # a sawtooth: something the script holds lets go at each reset
    if growth.bytes_per_step < MIN_UNTRACKED_PER_STEP or growth.r2 < MIN_UNTRACKED_R2:
        return []
    series = _with(snaps)
    if len(series) < 2 or _paths_grew([s for s in snaps if s.paths]):
        return []
    (first_step, first), (last_step, last) = series[0], series[-1]
    span = max(last_step - first_step, 1)
    heap = growth.bytes_per_step
    tensors_per_step = (last.tensor_bytes - first.tensor_bytes) / span
    objects_per_step = (last.gc_objects - first.gc_objects) / span
    if tensors_per_step >= 0.5 * heap:
        return []  # tensors grow: reachable ones are the path findings' business
    evidence = [
        f"the C heap grows by {format_bytes(heap)} per step (steps {growth.first_step}-"
        f"{growth.last_step}, R^2 {growth.r2:.2f})",
        f"live tensor storage stays flat: {format_bytes(first.tensor_bytes)} at step "
        f"{first_step}, {format_bytes(last.tensor_bytes)} at step {last_step}; no variable of "
        "the script accumulates tensors, graphs or items",
        f"Python objects tracked by gc: {first.gc_objects} at step {first_step}, "
        f"{last.gc_objects} at step {last_step} ({objects_per_step:+.1f} per step)",
    ]
    data: dict[str, Any] = {"heap_bytes_per_step": heap,
                            "tensor_bytes_per_step": round(tensors_per_step, 1),
                            "gc_objects_per_step": round(objects_per_step, 1),
                            "tensor_bytes": [last.tensor_bytes],
                            "snapshot_steps": [s for s, _ in series],
                            "bytes_measure": "heap"}
    calls = sorted(((n, c) for n, c in call_steps.items() if c >= MIN_CALL_SHARE * steps),
                   key=lambda nc: -nc[1])  # stable: WATCHED order among equal counts
    culprit, confidence = None, "low"
    fix = ("no Python variable holds this memory: look in the loop for calls that keep what "
           "they build inside torch or a C++ extension (TorchScript, compiled or cached "
           "kernels); `torchmem lines script.py` shows the lines where the heap grows")
    if calls:
        name, count = calls[0]
        site = call_sites.get(name)
        culprit = Culprit(name=name, kind="unknown", file=site[0] if site else None,
                          line=site[1] if site else None, code=site[2] if site else None)
        evidence.append(f"`{name}` ran in {count} of {steps} steps"
                        + (f" (line {site[1]}: `{site[2]}`)" if site else "")
                        + ": what it compiles is kept by TorchScript, not by a variable")
        fix = (f"call `{name}` once, before the loop, and reuse what it returns: each call "
               "compiles the module again and the heap keeps what it compiled"
               + (f" (line {site[1]}: `{site[2]}`)" if site else ""))
        confidence = "medium"
        data["calls"] = dict(calls)
    else:
        match = _grad_match(last, heap)
        if match is not None:
            path, nbytes, layout = match
            site = backward_site
            culprit = Culprit(name=path, kind="attribute", file=site[0] if site else None,
                              line=site[1] if site else None, code=site[2] if site else None,
                              type="Parameter")
            evidence.append(f"the growth per step is the size of `{path}`'s gradient "
                            f"({format_bytes(nbytes)}, layout {layout}): about one such "
                            "gradient per backward is left behind inside torch, although "
                            "the script keeps none")
            fix = (f"no line of the script keeps it: memory is lost inside torch with each "
                   f"{layout} gradient of `{path}`; try the parameter in another layout "
                   "(strided, or sparse COO), check with `torchmem doctor` that the growth is "
                   "gone, and report it to PyTorch with this evidence")
            data["gradient_bytes"] = nbytes
    at_end = int(growth.total_growth + heap * max(steps - growth.last_step, 0))
    return [Finding(cause="untracked_growth", title=TITLE_UNTRACKED, device="cpu",
                    bytes=max(at_end, 0), bytes_per_step=round(heap, 1), culprit=culprit,
                    evidence=tuple(evidence), fix=fix, confidence=confidence, data=data)]
