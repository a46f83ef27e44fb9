"""Deep analysis inside evaluation passes: what grows during each pass and is let go after.

An evaluation pass run with grad enabled builds a graph per forward. Kept in a running
sum (``val_loss += loss``) or chained through a state (``out, self.hidden = self.lstm(x,
self.hidden)``), those graphs pile up until the pass ends and are released when the
variable is reset, often at the next pass: memory rises to a plateau and falls back,
which no growth over the training steps shows. :class:`PassEvidence` snapshots the
script's variables (:func:`~torchmem.doctor.culprit.take_snapshot`) at pass steps 1, 2,
3, 4, 6, 8, 12, 16... of the first :data:`MAX_PASSES` passes with grad enabled, and once
more when each of those passes ends. A path whose autograd graph grows steadily over at
least three snapshots within at least two passes (or, with a single pass, over at least
four snapshots) is a finding: ``eval_graph`` (graphs no backward consumed) or
``hidden_state_chain``. The snapshots a ``pass_drop`` event names (forwards of a pass
found by its count that a backward went through: a training step's) are forgotten.
Containers filled during a pass (predictions collected for a metric) are what evaluation
does and are not reported, except one that the training steps kept level and the pass
makes grow (:mod:`torchmem.doctor.pass_containers`: a forward hook that keeps what only a
backward takes away).

Cost: about ``2 * log2(forwards)`` snapshots per pass, in at most :data:`MAX_PASSES`
passes; a pass under ``no_grad`` gets one at its first watched forward, and the others
only while the heap has risen since then by at least
:data:`~torchmem.doctor.pass_containers.MIN_RISE` per forward (a flat evaluation costs
one snapshot per pass).
"""

from __future__ import annotations

from dataclasses import replace
from types import FrameType
from typing import Any, Callable

from torchmem.doctor.causes import Evidence, path_findings, path_signal, significant_growth
from torchmem.doctor.culprit import PathStats, Snapshot, take_snapshot
from torchmem.doctor.pass_containers import MIN_RISE, container_findings
from torchmem.doctor.pass_sawtooth import sawtooth_findings
from torchmem.doctor.pass_statement import statement_findings

__all__ = ["PassEvidence", "MAX_PASSES"]

#: evaluation passes that get snapshots (under ``no_grad`` only while the heap rises)
MAX_PASSES = 4
#: heap readings kept per pass
MAX_READINGS = 4096
#: causes a pass can show (a container filled during evaluation is normal)
_PASS_CAUSES = ("eval_graph", "hidden_state_chain")


def _rising(readings: list[tuple[int, int]]) -> bool:
    """Whether a pass under ``no_grad`` is worth a snapshot now: at its first watched
    forward (the baseline), or when the heap has risen since then by at least
    :data:`~torchmem.doctor.pass_containers.MIN_RISE` per forward."""
    if len(readings) <= 1:
        return True
    (i0, h0), (i1, h1) = readings[0], readings[-1]
    return h1 - h0 >= MIN_RISE * (i1 - i0)


def _due(index: int) -> bool:
    """Pass steps with a snapshot: 1, 2, 3, 4, 6, 8, 12, 16, 24..."""
    if index <= 4:
        return True
    if index & (index - 1) == 0:
        return True
    third = index // 3
    return index % 3 == 0 and third & (third - 1) == 0


class PassEvidence:
    """Snapshots taken during evaluation passes, and the findings they prove."""

    def __init__(self) -> None:
        self.passes: dict[int, list[Snapshot]] = {}
        self.announced: dict[int, bool] = {}
        #: per pass: ``(forward index, C heap)`` at each of its forwards, and its mode
        self.readings: dict[int, list[tuple[int, int]]] = {}
        self.grad: dict[int, bool] = {}
        #: counters of the snapshots taken when a pass ended
        self.ends: set[int] = set()

    def on_event(self, run: Any, name: str, info: dict[str, Any],
                 guard: Callable[..., None]) -> None:
        """Take the snapshots a ``pass_step``/``pass_end`` event calls for; forget those a
        ``pass_drop`` event says were taken in a training step."""
        number = int(info.get("pass", 0))
        if name == "pass_drop":
            since = int(info.get("from_counter", 0))
            kept = [s for s in self.passes.get(number, ()) if s.step < since]
            if kept and not info.get("whole"):
                self.passes[number] = kept
            else:
                self.passes.pop(number, None)
            return
        self.announced[number] = bool(info.get("announced", True))
        if name == "pass_step":
            index, heap = int(info["index"]), info.get("heap")
            readings = self.readings.setdefault(number, [])
            if heap is not None and len(readings) < MAX_READINGS:
                readings.append((index, int(heap)))
            grad = self.grad[number] = self.grad.get(number, False) or bool(info.get("grad"))
            if number > MAX_PASSES or not _due(index):
                return
            if not grad and not _rising(readings):
                return
        elif name != "pass_end" or number not in self.passes:
            return
        else:
            self.ends.add(int(info["counter"]))
        guard("pass snapshot", int(info["counter"]), self._snapshot, run, number,
              int(info["counter"]), info.get("frame"))

    def _snapshot(self, run: Any, number: int, counter: int, frame: FrameType | None) -> None:
        snap = take_snapshot(counter, frame, run.main_globals, run.frames.is_user_file,
                             outermost=run.outermost)
        self.passes.setdefault(number, []).append(snap)

    def findings(self, training: list[Snapshot] | None = None) -> list[Any]:
        """The findings of the passes (empty when nothing grows within them).
        ``training``: the snapshots of the training steps, against which containers
        that grow during a pass are judged (:mod:`~torchmem.doctor.pass_containers`)."""
        # filled in every pass and let go after it: the more specific explanation first
        out = sawtooth_findings(self.passes, self.readings, self.grad, self.ends,
                                self._opened_by())
        named = {f.culprit.name for f in out if f.culprit is not None}
        out += [f for f in container_findings(self.passes, self.readings, self.grad,
                                              training or [], self._opened_by())
                if f.culprit is None or f.culprit.name not in named]
        out += [f for f in self._graph_findings()
                if f.culprit is None or f.culprit.name not in
                {g.culprit.name for g in out if g.culprit is not None}]
        if not any(f.data.get("phase") == "eval-grad" for f in out):
            # graphs kept by a collection no name holds yet: the statement that builds it
            out += statement_findings(self.passes, self.readings, self.grad, self.ends,
                                      self._opened_by())
        return out

    def _graph_findings(self) -> list[Any]:
        growing: dict[str, dict[str, float]] = {}
        stats: dict[str, PathStats] = {}
        steps: dict[str, list[int]] = {}
        judged: dict[str, int] = {}
        names = {p for snaps in self.passes.values() for s in snaps for p in s.paths}
        for path in names:
            grew = []
            for number, snaps in self.passes.items():
                if not self.grad.get(number, True):
                    continue  # graphs are built with grad enabled only
                present = [s.paths[path] for s in snaps if path in s.paths]
                at = [s.step for s in snaps if path in s.paths]
                if len(present) > 2 and at[-1] in self.ends and (
                        present[-1].graph_nodes < present[-2].graph_nodes
                        or present[-1].grad_tensors < present[-2].grad_tensors) \
                        and (present[-2].items or 0) > (present[0].items or 0):
                    # a container that filled during the pass and was let go as it ended
                    # (a callback emptied at the next epoch's start): what it held at the
                    # pass's forwards is what is judged (a tensor rebound by the next
                    # training step is not such a container)
                    present, at = present[:-1], at[:-1]
                # a collection made anew during the pass (`feats = []` before the loop
                # that fills it): judged from its last new start
                restart = max((i for i in range(1, len(present)) if _dropped(present[i - 1], present[i])),
                              default=0)
                if len(present) - restart >= 3 and \
                        (present[-1].items or 0) > (present[restart].items or 0):
                    present, at = present[restart:], at[restart:]  # a collection that refills
                if len(present) < 3:
                    continue  # one graph replaced by the next is no accumulation
                if present[-1].live_nodes == 0 and present[-1].freed_nodes > 0:
                    continue  # a backward ran through all of it: a training graph, not built here
                judged[path] = judged.get(path, 0) + 1
                sig = path_signal(present[0], present[-1], at[-1] - at[0])
                graphs = sig["grad_tensors"] > 0 or sig["nodes"] > 0
                steady = all(b.graph_nodes >= a.graph_nodes and b.grad_tensors >= a.grad_tensors
                             for a, b in zip(present, present[1:]))
                if significant_growth(sig) and graphs and steady:
                    grew.append((sig, present[-1], at))
            if len(grew) >= 2 or (len(grew) == 1 and judged.get(path) == 1 and len(grew[0][2]) >= 4):
                sig, last_stats, at = grew[-1]
                growing[path] = dict(sig, resets=float(len(grew)))
                stats[path] = last_stats
                steps[path] = at
        if not growing:
            return []
        self._add_new_parts(growing, stats, steps)
        out = []
        for finding in path_findings(Evidence(), growing, stats, [0, 1], {}, eval_pass=True):
            name = finding.culprit.name if finding.culprit else None
            if finding.cause not in _PASS_CAUSES or name not in growing:
                continue
            at = steps[name]
            passes = int(growing[name].get("resets", 1))
            evidence = [e for e in finding.evidence
                        if not e.startswith("measured at steps") and "emptied now and then" not in e]
            evidence.append(f"it grows during each evaluation pass ({self._opened_by()}, "
                            f"grad enabled): in {passes} pass{'es' if passes > 1 else ''} "
                            f"({len(at)} snapshots in the last one, from its first forward "
                            "to its end) and is let go afterwards; the peak grows with the "
                            "number of evaluation batches")
            data = {k: v for k, v in finding.data.items() if k != "end_step"}
            data.update(snapshot_steps=at, phase="eval-grad",
                        step_unit="top-level module call in evaluation")
            out.append(replace(finding, evidence=tuple(evidence), data=data))
        out.sort(key=lambda f: -f.bytes_per_step)  # the fastest-growing first
        return out

    def _add_new_parts(self, growing: dict[str, dict[str, float]], stats: dict[str, PathStats],
                       steps: dict[str, list[int]]) -> None:
        """Add the parts of each growing path that appeared during the pass with graphs
        (``self.results_te``, bound to a dict of metric tensors while the pass ran): too
        new to be judged on their own, they say where the growth of ``self`` went, so the
        culprit is the part that holds it, not the object at the root. A part is added
        only below a path already counted as growing (parents first), measured over the
        snapshots its parent was judged on."""
        by_step = {s.step: s for snaps in self.passes.values() for s in snaps}
        todo = sorted(growing, key=lambda p: stats[p].depth)
        while todo:
            parent = todo.pop(0)
            first, last = by_step.get(steps[parent][0]), by_step.get(steps[parent][-1])
            if first is None or last is None or first is last:
                continue
            depth = stats[parent].depth + 1
            for path, now in last.paths.items():
                if path in growing or now.depth != depth or path in first.paths \
                        or not path.startswith(parent) \
                        or path[len(parent):len(parent) + 1] not in (".", "[", ":"):
                    continue  # only parts that appeared since: the others were judged above
                sig = path_signal(None, now, last.step - first.step)
                if significant_growth(sig) and (sig["grad_tensors"] > 0 or sig["nodes"] > 0):
                    growing[path] = dict(sig, resets=growing[parent].get("resets", 1.0))
                    stats[path], steps[path] = now, steps[parent]
                    todo.append(path)

    def _opened_by(self) -> str:
        """How the analysed passes were found, in words."""
        found = {self.announced.get(n, True) for n in self.passes}
        if found == {True}:
            return "model.eval()"
        if found == {False}:
            return "top-level forwards that no backward went through"
        return "model.eval(), or forwards that no backward went through"


def _dropped(before: PathStats, after: PathStats) -> bool:
    """Whether a path held fewer graph nodes, tensors with graphs or items at ``after``
    than at ``before`` (emptied, or bound to a new collection)."""
    return after.graph_nodes < before.graph_nodes or after.grad_tensors < before.grad_tensors \
        or (after.items or 0) < (before.items or 0)
