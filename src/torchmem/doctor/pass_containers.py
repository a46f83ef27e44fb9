"""Containers that training keeps level and an evaluation pass makes grow.

A forward hook that appends each layer's input to a list, and a backward hook that pops
it (per-sample gradients), stay level over the training steps: every forward is followed
by a backward. Evaluated without a backward (under ``no_grad``, or with grad and no
loss), the forwards still append and nothing pops: the list grows with the number of
evaluation batches, often in a loop after the last training step, where no training
step's growth verdict can see it. The same holds for anything a training step consumes
and a forward produces.

:func:`container_findings` reports a path as ``growing_container`` when, in one
evaluation pass of at least :data:`~torchmem.analyze.growth.SINGLE_PASS_POINTS`
forwards,

* the C heap grows steadily over the pass (:func:`~torchmem.analyze.growth.detect_pass_growth`
  on its readings: R^2, plateau, slope above 1 KiB per forward);
* the path's tensors (or items) never shrink from one pass snapshot to the next, over at
  least :data:`MIN_SNAPSHOTS` snapshots, and it keeps at least
  :data:`~torchmem.doctor.path_trend.MIN_BYTES_PER_STEP` of tensor storage more per
  forward;
* the path was there at two or more training snapshots and did not grow over the last
  two of them: the training steps kept it level. Predictions collected in a list made for
  the evaluation (a local of the evaluation function, or one filled only there) are not
  such a path, and are not reported, nor is a list the script fills in a loop of its own
  (the statement that adds to it sits in a ``for``/``while``: a forward or a hook adds once
  per call). Or the path is reached only through what a module's
  hook closes over (``model.pool._forward_hooks[3]:self.acts``, no variable of the
  script reaching it first): a hook left registered by an object the script has dropped
  (a Grad-CAM explainer made once) adds at every later forward, training or not.

The culprit is named as for training findings (the deepest growing path that explains
70% of the growth, the statement that adds to it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from torchmem.analyze.growth import detect_pass_growth
from torchmem.doctor.causes import Evidence, path_findings, path_signal
from torchmem.doctor.hook_sites import HOOK_METHODS
from torchmem.doctor.path_trend import MIN_BYTES_PER_STEP
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.units import KiB

__all__ = ["container_findings", "MIN_RISE", "MIN_SNAPSHOTS"]

#: heap rise per forward (bytes) above which a ``no_grad`` pass keeps being snapshotted
MIN_RISE = 1 * KiB
#: pass snapshots a growing path needs
MIN_SNAPSHOTS = 4


def _level_in_training(path: str, training: list[Snapshot]) -> bool:
    seen = [s.paths[path] for s in training if path in s.paths]
    if len(seen) < 2:
        return False
    a, b = seen[-2], seen[-1]
    return b.tensors <= a.tensors and (b.items or 0) <= (a.items or 0) \
        and b.retained_bytes <= a.retained_bytes


def _under_a_hook(path: str) -> bool:
    """Whether ``path`` goes through a module's hook (``model.pool._forward_hooks[3]:self
    .acts``, ``model[2]._forward_hooks[5].acts`` for a bound method): the walk opens hooks
    after every variable (:meth:`torchmem.doctor.walker._Walker.finish`), so no variable
    of the script reaches it: it is not a collection the script made and reads (its
    predictions), but what a hook that stays registered adds to at every forward."""
    return any(f".{name}[" in path for name in HOOK_METHODS)


def _collected_in_a_loop(culprit: Any) -> bool:
    """Whether the statement that adds to the culprit sits in a ``for``/``while`` loop of
    its function (``feats.append(model.body(x).detach())`` in the loop over the evaluation
    batches): the script collects on purpose, where a forward or a hook adds once per call
    without a loop of its own."""
    from torchmem.doctor.statement_rank import innermost_loop

    if culprit is None or not culprit.file or not culprit.line:
        return False
    return innermost_loop(culprit.file, culprit.line) is not None


def _grows(present: list[PathStats]) -> bool:
    return all(b.tensors >= a.tensors and (b.items or 0) >= (a.items or 0)
               for a, b in zip(present, present[1:]))


def container_findings(passes: dict[int, list[Snapshot]], readings: dict[int, list[tuple[int, int]]],
                       grad: dict[int, bool], training: list[Snapshot], opened_by: str) -> list[Any]:
    """``growing_container`` findings of the passes (see the module docstring)."""
    out: list[Any] = []
    named: set[str] = set()
    for number, snaps in passes.items():
        verdict = detect_pass_growth([readings.get(number, [])])
        if verdict.verdict != "growing" or len(snaps) < MIN_SNAPSHOTS:
            continue
        growing: dict[str, dict[str, float]] = {}
        stats: dict[str, PathStats] = {}
        for path in dict.fromkeys(p for s in snaps for p in s.paths):
            at = [s.step for s in snaps if path in s.paths]
            present = [s.paths[path] for s in snaps if path in s.paths]
            if len(present) < MIN_SNAPSHOTS or path in named:
                continue
            sig = path_signal(present[0], present[-1], at[-1] - at[0])
            if sig["bytes"] < MIN_BYTES_PER_STEP or sig["tensors"] <= 0 or not _grows(present):
                continue
            if not (_level_in_training(path, training) or _under_a_hook(path)):
                continue
            growing[path] = dict(sig, resets=0.0)
            stats[path] = present[-1]
        if not growing:
            continue
        mode = "grad enabled" if grad.get(number) else "no_grad"
        for finding in path_findings(Evidence(), growing, stats, [0, 1], {}, eval_pass=True):
            name = finding.culprit.name if finding.culprit else None
            if finding.cause != "growing_container" or name not in growing:
                continue
            level = _level_in_training(name, training)
            if level and not _under_a_hook(name) and _collected_in_a_loop(finding.culprit):
                continue  # the script's own loop collects them: what the pass is run for
            named.add(name)
            evidence = [e for e in finding.evidence if not e.startswith("measured at steps")]
            evidence.append(
                f"it grows during evaluation pass {number} ({opened_by}, {mode}): from "
                f"{_count(snaps, name, 0)} to {_count(snaps, name, -1)} tensors over "
                f"{len([s for s in snaps if name in s.paths])} snapshots of the pass; the C "
                f"heap {verdict.reason}")
            if level:
                steady = [s.paths[name] for s in training if name in s.paths][-1]
                evidence.append(
                    f"over the training steps it stayed level ({steady.tensors} tensors at step "
                    f"{[s.step for s in training if name in s.paths][-1]}): what the training "
                    "step does after its forward (the backward, its hooks) consumes what the "
                    "forward adds, and the evaluation forwards add without it")
            else:
                evidence.append(
                    "no variable of the script reaches it, only a hook of the module does: "
                    "the hook stays registered and adds at every forward")
            data = {k: v for k, v in finding.data.items() if k != "end_step"}
            data.update(snapshot_steps=[s.step for s in snaps if name in s.paths],
                        phase="eval-grad" if grad.get(number) else "eval-no-grad",
                        step_unit="top-level module call in evaluation")
            c = finding.culprit
            where = f" (line {c.line}: `{c.code}`)" if c is not None and c.line else ""
            skip = ("skip adding when no backward will follow (return early when "
                    "`not torch.is_grad_enabled()`)" if not grad.get(number)
                    else "skip adding during evaluation")
            fix = (f"the statement that adds to `{name}`{where} runs at every forward, and only "
                   f"a training step consumes what it adds: {skip}, or empty `{name}` after "
                   "each evaluation forward") if level else (
                f"the hook that adds to `{name}`{where} stays registered after its owner is "
                "done with it: keep the handle `register_*_hook` returns and call "
                "`handle.remove()` when done (or empty the list after each use)")
            out.append(replace(finding, evidence=tuple(evidence), data=data, fix=fix,
                               fix_kind="advice", edit=None, alternatives=()))
    return out


def _count(snaps: list[Snapshot], path: str, at: int) -> int:
    present = [s.paths[path] for s in snaps if path in s.paths]
    return present[at].tensors
