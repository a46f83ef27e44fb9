"""Split a run into phases: training, evaluation passes, inference, loop iterations.

The step source (:mod:`torchmem.doctor.steps`) says what the script repeats. A script
that trains also evaluates: it runs forwards that are no training step. Such an
*evaluation pass* is watched on its own: each top-level forward in it is a pass step with
a reading of the C heap and an event (``pass_step``) for the probes, and its end is a
``pass_end`` event. Memory that rises during every pass and is released after it (loss
tensors summed without ``no_grad``, an RNN state chained across test batches) never makes
a line over the training steps; within the passes it does.

A pass is found two ways:

* *announced*: from ``model.eval()`` to the next ``model.train()``, ``backward()`` or
  optimizer step (every top-level forward counts, through global module hooks);
* *by its forwards*, for the many scripts that never call ``model.eval()``: the modules
  called at the top level before the first training step are watched
  (:mod:`torchmem.doctor.top_forwards`), their forwards between training steps are
  counted, and a run of more than twice the most a step has had, with no backward or
  optimizer step, opens a pass (:mod:`torchmem.doctor.pass_forwards`). It ends at the
  next ``backward()``, optimizer step, ``train()``/``eval()`` call or the end of the
  script, and is judged after that backward: the forwards the backward went through were
  the next training step's and are cut off (a ``pass_drop`` event tells the probes to
  forget what they took there); when the backward went through the pass's first
  forwards, it was one long training step (a policy-gradient episode) and is no pass.

Labels come from evidence: ``train`` when optimizer steps or ``backward()`` calls are the
steps; ``eval-grad``/``eval-no-grad`` by ``torch.is_grad_enabled()`` at the pass's
forwards; ``inference`` when top-level forwards are the steps (the script never trains);
``loop`` for loop iterations. Training stretches between passes are the epochs.

Cost: per training step one counter update per top-level forward of the watched modules
(besides their ``__call__``, see :mod:`torchmem.doctor.top_forwards`); during an announced
pass the global module hooks (torch's slow path for each module call); during any pass one
heap reading per top-level forward, and in a pass found by its forwards one graph pre-hook
per grad-enabled forward. A ``model.eval()`` that is followed by a training step after at
most one forward (a sub-module frozen in eval mode every step) is not a pass; after three
of those, ``eval()`` calls are no longer watched.

Known limitations:
    * A pass found by its forwards starts at the forward that exceeds twice a step's
      count: the forwards before it are counted but not watched (no reading, no
      snapshot). An evaluation loop with at most twice as many top-level forwards as a
      training step (two batches) is no pass, nor is one run before the second
      training step, or one whose modules were first called after the first step and
      are of another class.
    * Two loops without a backward between them (a ``no_grad`` one, then one with grad)
      are one pass, labelled ``eval-grad``.
    * Forwards whose outputs no backward uses, in a step that a backward ends (a
      detached teacher's forward with grad enabled), make the step look longer; a
      script whose steps vary that much (reinforcement learning whose acting forwards
      no backward uses) can show passes that are acting, not evaluating; a finding
      needs a graph that grows steadily within grad-enabled passes.
    * In a script whose steps are forwards or loop iterations, passes are not split off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Callable, TypedDict

import torch

from torchmem.doctor.pass_forwards import Consumption, ForwardCount

__all__ = ["HookCallbacks", "PassRecord", "PhaseTracker", "MAIN_KIND"]

#: the phase kind of a run's own steps, by step source
MAIN_KIND = {"optimizer": "train", "backward": "train", "forward": "inference",
             "loop": "loop", "session": "session"}

#: passes ended by a training step after at most one forward before eval() is ignored
_MAX_DISCARDED = 3
#: readings kept per pass
_MAX_READINGS = 4096


class HookCallbacks(TypedDict):
    """The keyword arguments of :class:`~torchmem.doctor.steps.StepHooks` a tracker gives."""

    on_pass_forward: Callable[[FrameType | None], None]
    on_top_forward: Callable[[FrameType | None, Any], None]
    after_backward: Callable[[], None]


@dataclass
class PassRecord:
    """One evaluation pass (plain data).

    Attributes:
        number: 1-based pass number.
        start_step, end_step: training steps done when it started and ended.
        forwards: its top-level forwards; ``grad_forwards`` of them with grad enabled.
        readings: ``(pass step counter, C-heap bytes)`` at each forward.
        ended_by: ``train()``, ``eval()``, ``backward``, ``step`` or ``end``.
        announced: opened by ``model.eval()`` (False: by its count of forwards).
        first_counter: the pass step counter of its first watched forward.
    """

    number: int
    start_step: int
    end_step: int = 0
    forwards: int = 0
    grad_forwards: int = 0
    readings: list[tuple[int, int]] = field(default_factory=list)
    ended_by: str = ""
    announced: bool = True
    first_counter: int = 0

    @property
    def kind(self) -> str:
        return "eval-grad" if self.grad_forwards else "eval-no-grad"


class PhaseTracker:
    """Opens and closes evaluation passes from the step hooks' events.

    Args:
        source: returns the run's current step source.
        step_count: returns the number of training steps so far.
        heap: returns the C heap in use (bytes) or None.
        dispatch: ``dispatch(name, info)`` sends an event to the probes.

    Attributes:
        hooks: the :class:`~torchmem.doctor.steps.StepHooks` (set by the runner; without
            them no pass announced by ``eval()`` is watched).
        passes: the finished passes.
    """

    def __init__(self, source: Callable[[], str], step_count: Callable[[], int],
                 heap: Callable[[], int | None],
                 dispatch: Callable[[str, dict[str, Any]], None]) -> None:
        self._source = source
        self._step_count = step_count
        self._heap = heap
        self._dispatch = dispatch
        self.hooks: Any = None
        self.passes: list[PassRecord] = []
        self.current: PassRecord | None = None
        self._counter = 0
        self._discarded = 0
        self._count = ForwardCount()
        self._consumption: Consumption | None = None
        self._pending: tuple[PassRecord, Consumption] | None = None

    def callbacks(self) -> "HookCallbacks":
        """The :class:`~torchmem.doctor.steps.StepHooks` callbacks that feed this tracker."""
        return {"on_pass_forward": self.on_forward, "on_top_forward": self.on_top_forward,
                "after_backward": self.after_backward}

    # -- events -------------------------------------------------------------------------
    def on_event(self, name: str, info: dict[str, Any]) -> None:
        if name == "mode":
            self._count.since = 0
            if info.get("training"):
                self.close("train()", info.get("frame"))
                return
            if self.current is not None and not self.current.announced:
                self.close("eval()", info.get("frame"))
            if self._pending is not None:
                self.settle(info.get("frame"))
            if (self.current is None and self.hooks is not None
                    and self._discarded < _MAX_DISCARDED
                    and self._source() in ("optimizer", "backward")):
                self.current = PassRecord(number=len(self.passes) + 1,
                                          start_step=self._step_count())
                self.hooks.watch_forwards(True)
        elif name == "backward":
            self._count.boundary(counted=self.current is None)
            self.close("backward", None)

    def on_train_step(self) -> None:
        """A training step ended (an evaluation pass in progress was not one)."""
        self._count.boundary(counted=self.current is None)
        if self.current is not None:
            self.close("step", None)
        if self._pending is not None:
            self.settle(None)

    def after_backward(self) -> None:
        """A ``backward()`` returned: a pass it ended can be judged now."""
        if self._pending is not None:
            self.settle(None)

    def on_forward(self, frame: FrameType | None) -> None:
        """A top-level forward returned during a pass opened by ``model.eval()``."""
        current = self.current
        if current is not None and current.announced:
            self._record(current, frame)

    def on_top_forward(self, frame: FrameType | None, output: Any) -> None:
        """A top-level forward of a module seen before the training steps returned."""
        current = self.current
        if current is not None and current.announced:
            return  # counted by the pass's own hooks
        count = self._count
        count.since += 1
        if current is None:
            if self._pending is not None or not count.exceeded():
                return
            current = self.current = PassRecord(
                number=len(self.passes) + 1, start_step=self._step_count(),
                forwards=count.since - 1, announced=False, first_counter=self._counter + 1)
            self._consumption = Consumption()
        grad = self._record(current, frame)
        if self._consumption is not None:
            self._consumption.watch(self._counter, grad, output)

    def _record(self, current: PassRecord, frame: FrameType | None) -> bool:
        self._counter += 1
        current.first_counter = current.first_counter or self._counter
        current.forwards += 1
        grad = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        current.grad_forwards += grad
        heap = self._heap()
        if heap is not None and len(current.readings) < _MAX_READINGS:
            current.readings.append((self._counter, heap))
        self._dispatch("pass_step", {"frame": frame, "pass": current.number,
                                     "index": current.forwards, "counter": self._counter,
                                     "grad": grad, "heap": heap,
                                     "announced": current.announced})
        return grad

    def close(self, reason: str, frame: FrameType | None) -> None:
        """End the pass in progress, if any (``frame``: where the script is now)."""
        current = self.current
        if current is None:
            if reason == "end" and self._pending is not None:
                self.settle(frame)
            return
        self.current = None
        current.ended_by = reason
        current.end_step = self._step_count()
        if not current.announced:
            assert self._consumption is not None
            self._pending, self._consumption = (current, self._consumption), None
            if reason in ("end", "eval()", "step"):
                self.settle(frame)
            return
        if self.hooks is not None:
            self.hooks.watch_forwards(False)
        if current.forwards <= 1 and reason in ("backward", "step"):
            self._discarded += 1  # a module in eval mode inside a training step
            return
        if current.forwards:
            self._finish(current, frame)

    def settle(self, frame: FrameType | None) -> None:
        """Judge the pass that forwards opened, once the backward after it ran: what a
        backward went through was a training step's (cut off, or the whole run)."""
        if self._pending is None:
            return
        record, consumption = self._pending
        self._pending = None
        reached = consumption.first_reached()
        last = self._counter
        if reached is not None and reached <= record.first_counter:
            consumption.release()
            self._count.step_had(record.forwards)  # one long training step (an episode)
            self._dispatch("pass_drop", {"pass": record.number, "whole": True,
                                         "from_counter": record.first_counter})
            return
        if reached is not None:
            cut = last - reached + 1
            record.grad_forwards -= min(consumption.grad_forwards_from(reached),
                                        record.grad_forwards)
            record.forwards -= cut
            record.readings = [r for r in record.readings if r[0] < reached]
            self._count.step_had(cut)
            self._dispatch("pass_drop", {"pass": record.number, "whole": False,
                                         "from_counter": reached})
        consumption.release()
        self._finish(record, frame)

    def _finish(self, record: PassRecord, frame: FrameType | None) -> None:
        self.passes.append(record)
        self._counter += 1
        self._dispatch("pass_end", {"frame": frame, "pass": record.number,
                                    "counter": self._counter, "kind": record.kind,
                                    "announced": record.announced})

    # -- summary ------------------------------------------------------------------------
    def summaries(self, source: str, steps: list[Any], main_growth: Any) -> list[Any]:
        """The run's :class:`~torchmem.model.capture.Phase` list."""
        from torchmem.analyze.growth import detect_pass_growth
        from torchmem.model.capture import Phase

        out = []
        kind = MAIN_KIND.get(source)
        if kind is not None and steps:
            out.append(Phase(kind=kind, passes=len(self.passes) + 1 if kind == "train" else 1,
                             steps=len(steps), first_step=steps[0].step,
                             last_step=steps[-1].step, growth=main_growth))
        for label in ("eval-grad", "eval-no-grad"):
            group = [p for p in self.passes if p.kind == label]
            if not group:
                continue
            out.append(Phase(kind=label, passes=len(group), steps=sum(p.forwards for p in group),
                             first_step=group[0].start_step, last_step=group[-1].end_step,
                             growth=detect_pass_growth([p.readings for p in group])))
        return out
