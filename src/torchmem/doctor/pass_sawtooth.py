"""Containers that fill during every evaluation pass and are let go when it ends.

A validation loop that keeps every batch's display images (``val_images.extend(...)``)
until the pass ends, emptied or rebound at the next epoch, makes memory rise within each
pass and fall back after it: a sawtooth. No growth over the training steps shows it, yet
the peak of the run grows with the number of evaluation batches. :func:`sawtooth_findings`
reports such a path as ``growing_container`` when

* the evaluation passes of one mode (``no_grad`` or grad enabled) rise within every pass
  (:func:`~torchmem.analyze.growth.detect_pass_growth` on their heap readings, at least
  :data:`MIN_PASSES` passes judged);
* in at least :data:`MIN_PASSES` of those passes, the path's tensors and items never
  shrink over at least :data:`~torchmem.doctor.pass_containers.MIN_SNAPSHOTS` of the
  snapshots taken at the pass's forwards (the one taken at the pass's end is left out:
  the script may rebind the container there), and it keeps at least
  :data:`~torchmem.doctor.path_trend.MIN_BYTES_PER_STEP` more tensor storage per forward:
  in more tensors, or in larger ones at every snapshot (``preds = torch.cat((preds,
  logits))`` keeps one tensor that grows);
* it is let go between those passes: each starts with fewer tensors, or fewer bytes, than
  the one before ended with (one that keeps growing across passes is not a sawtooth);
* what it keeps per forward is at least :data:`MIN_HEAP_SHARE` of the heap's rise per
  forward (it is what makes the sawtooth), and the heap's rise over one pass is at least
  :data:`MIN_PEAK_SHARE` of the heap at the pass's first forward: it raises the peak by a
  large share. Predictions collected for a metric take a small share and are not
  reported.

The finding says what it is: memory freed at the pass's end that raises the peak; its
bytes are what the path held at its largest, its confidence ``high`` from
:data:`HIGH_PASSES` passes on (``medium`` with fewer).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from torchmem.analyze.growth import detect_pass_growth
from torchmem.doctor.causes import Evidence, path_findings, path_signal
from torchmem.doctor.pass_containers import MIN_SNAPSHOTS
from torchmem.doctor.path_trend import MIN_BYTES_PER_STEP
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.units import format_bytes

__all__ = ["sawtooth_findings", "MIN_PASSES", "HIGH_PASSES", "MIN_HEAP_SHARE", "MIN_PEAK_SHARE"]

#: passes in which a path must grow
MIN_PASSES = 2
#: passes seen from which the finding's confidence is high
HIGH_PASSES = 3
#: share of the heap's rise per forward the path must keep
MIN_HEAP_SHARE = 0.5
#: a pass's heap rise, as a share of the heap at its first forward, that counts as large
MIN_PEAK_SHARE = 0.1


def _grows(present: list[PathStats]) -> bool:
    return all(b.tensors >= a.tensors and (b.items or 0) >= (a.items or 0)
               for a, b in zip(present, present[1:]))


def _path_growth(path: str, snaps: list[Snapshot]) -> tuple[dict[str, float], PathStats, PathStats] | None:
    """(signal per forward, stats at its largest, stats at its first snapshot) of ``path``
    within one pass, when it grows there (see the module docstring)."""
    at = [s.step for s in snaps if path in s.paths]
    present = [s.paths[path] for s in snaps if path in s.paths]
    if len(present) < MIN_SNAPSHOTS or not _grows(present):
        return None
    sig = path_signal(present[0], present[-1], at[-1] - at[0])
    if sig["bytes"] < MIN_BYTES_PER_STEP:
        return None
    if sig["tensors"] <= 0 and not all(b.retained_bytes > a.retained_bytes
                                       for a, b in zip(present, present[1:])):
        return None  # neither more tensors nor larger ones at every snapshot
    return sig, present[-1], present[0]


def sawtooth_findings(passes: dict[int, list[Snapshot]], readings: dict[int, list[tuple[int, int]]],
                      grad: dict[int, bool], ends: set[int], opened_by: str) -> list[Any]:
    """``growing_container`` findings for containers that fill during every evaluation
    pass and are let go after it (see the module docstring). ``ends``: the counters of
    the snapshots taken at a pass's end."""
    out: list[Any] = []
    for mode in (False, True):
        numbers = [n for n in passes if bool(grad.get(n)) == mode and readings.get(n)]
        if len(numbers) < MIN_PASSES:
            continue
        verdict = detect_pass_growth([readings[n] for n in numbers])
        if verdict.verdict != "growing" or verdict.bytes_per_step <= 0:
            continue
        bases = [readings[n][0][1] for n in numbers]
        peak_share = verdict.total_growth / max(statistics.median(bases), 1)
        if peak_share < MIN_PEAK_SHARE:
            continue
        forwards = {n: [s for s in passes[n] if s.step not in ends] for n in numbers}
        growing: dict[str, dict[str, float]] = {}
        stats: dict[str, PathStats] = {}
        seen: dict[str, int] = {}
        for path in dict.fromkeys(p for n in numbers for s in forwards[n] for p in s.paths):
            grew = [g for g in (_path_growth(path, forwards[n]) for n in numbers) if g is not None]
            if len(grew) < MIN_PASSES:
                continue
            if any(b[2].tensors >= a[1].tensors and b[2].retained_bytes >= a[1].retained_bytes
                   for a, b in zip(grew, grew[1:])):
                continue  # not let go between passes: not a sawtooth
            sig = dict(grew[-1][0])
            sig["bytes"] = statistics.median(g[0]["bytes"] for g in grew)
            if sig["bytes"] < MIN_HEAP_SHARE * verdict.bytes_per_step:
                continue
            growing[path] = dict(sig, resets=0.0)
            stats[path] = max((g[1] for g in grew), key=lambda p: p.retained_bytes)
            seen[path] = len(grew)
        if not growing:
            continue
        for finding in path_findings(Evidence(), growing, stats, [0, 1], {}):
            name = finding.culprit.name if finding.culprit else None
            if finding.cause != "growing_container" or name not in growing:
                continue
            out.append(_finding(finding, name, stats[name], seen[name], len(numbers), verdict,
                                peak_share, mode, opened_by))
    return out


def _finding(finding: Any, name: str, stats: PathStats, grew_in: int, judged: int,
             verdict: Any, peak_share: float, grad: bool, opened_by: str) -> Any:
    mode = "grad enabled" if grad else "no_grad"
    evidence = [e for e in finding.evidence if not e.startswith("measured at steps")]
    evidence.append(
        f"it grows during {grew_in} of {judged} evaluation passes ({opened_by}, {mode}), "
        f"by {format_bytes(finding.data.get('tensor_bytes_per_step', 0))} of tensor storage "
        f"per forward, up to "
        f"{format_bytes(stats.retained_bytes)} ({stats.tensors} tensors) before the pass ends; "
        f"the C heap {verdict.reason}")
    evidence.append(
        f"it is let go between passes (each pass starts with less in it than the one "
        f"before ended with), so it is not kept forever; but every pass raises the peak by "
        f"{format_bytes(verdict.total_growth)}"
        f", {peak_share:.0%} of the heap at the pass's first forward, and the rise grows with "
        "the number of evaluation batches")
    data = {k: v for k, v in finding.data.items() if k != "end_step"}
    data.update(phase="eval-grad" if grad else "eval-no-grad", passes=judged,
                passes_growing=grew_in, peak_share=round(peak_share, 3),
                pass_rise=verdict.total_growth, released_after_pass=True,
                step_unit="top-level module call in evaluation")
    c = finding.culprit
    where = f" (line {c.line}: `{c.code}`)" if c is not None and c.line else ""
    fix = (f"`{name}` is let go between evaluation passes, but it keeps everything a pass "
           f"adds{where} until then: keep only what is used after the pass (a few "
           "items, or summaries such as `.item()`/means), or write each item out and drop "
           "it as it comes")
    return replace(finding, title="container filled during every evaluation pass",
                   bytes=stats.retained_bytes, evidence=tuple(evidence), data=data, fix=fix,
                   fix_kind="advice", edit=None, alternatives=(),
                   confidence="high" if grew_in >= HIGH_PASSES else "medium")
