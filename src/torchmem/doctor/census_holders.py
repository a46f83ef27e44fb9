"""The doctor's censuses at the peak, at an out-of-memory error and at the end, with who
holds their largest storages.

**When.** A census (:func:`torchmem.collect.census.census`) lists every live storage with
its role; the holder walk (:func:`torchmem.doctor.holders_api.search`, one breadth-first
walk for all the storages of a moment) names the paths that keep the largest ones alive.
Both need the script's objects alive, so they run at step boundaries and at the failure
point, never after the script's objects are gone:

* **peak**: at a step boundary whose memory reading is at the highest of the run so far
  on some device (within :data:`MIN_RISE` of it: noise) and above the reading at the last
  census by at least :data:`RISE` (5 %) of the growth from the first step to that census
  (and by :data:`MIN_RISE`), when the step is a power of two (at most log2(steps) such
  censuses) or the time spent on censuses stays within :data:`BUDGET` (2 %) of the wall
  time since the first step; the first census, at step 2, is always taken. A flat run
  gets one or a few; a steadily growing one a census at each doubling of its steps, and
  more while the budget allows. The census can lag the highest reading (a run that grows
  to its last step cannot know which step is the last): the section then says what the
  highest step reading was and at which step.
* **oom** / **exception**: at the error, from the frames of its traceback (they hold the
  step's objects).
* **eval_peak**: after a forward of an evaluation pass (``model.eval()`` until the next
  ``model.train()`` or training step, or a run of forwards with no backward: see
  :mod:`torchmem.doctor.phases`) whose heap reading is a new high of the evaluation
  passes, by the same rise, when the count of evaluation forwards so far is a power of two
  or within the same budget (the first one is always taken). Forwards that turn out to
  be a training step's (``pass_drop``) give back the evaluation peak before them.
* **end**: at the last step of ``--steps``, or after the script's last statement when
  tensors are still alive then (a script that works at module level); when nothing is
  alive any more (everything lived in a function that returned) the peak stands for it.

The peak (or the failure) census also feeds the capture's largest storages and bytes by
role, so one census gives the same numbers in the terminal, the JSON and the HTML.

Cost: a census (tens of ms with a small model; see ``docs/census.md``) plus one walk of
the objects the script's variables reach (about 1-2 us each) per census; per step, one
comparison of the step's reading with the highest so far.

Nothing of the script is kept: the moments are plain data.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from types import FrameType
from typing import Any, Callable

from torchmem.model.census import ROLES
from torchmem.model.holders import HeldStorage, HolderPath, HoldersMoment
from torchmem.model.lines import StackFrame
from torchmem.units import format_bytes

__all__ = ["PeakCensus", "describe_census", "TOP", "TOP_UNOWNED", "RISE", "BUDGET"]

#: the largest storages described at each moment...
TOP = 5
#: ...and, on top of those, the largest that no module or optimizer owns (leaks show there)
TOP_UNOWNED = 3
#: a new peak census needs a reading above the last census's by this fraction of the
#: growth from the first step to that census...
RISE = 0.05
#: ...and by at least this many bytes...
MIN_RISE = 64 * 1024
#: ...and by at least this fraction of the reading at the last census
RISE_OF_READING = 0.01
#: time spent on censuses stays within this fraction of the wall time since the first step
BUDGET = 0.02
#: most holder paths listed per storage
MAX_PATHS = 2
#: the extra storages that no module or optimizer owns are listed from this size on
MIN_UNOWNED = 4096
#: the holder walk's budget of objects
MAX_OBJECTS = 200_000

_OWNED = ("parameter", "buffer", "gradient", "optimizer_state")

#: with ``--lines``: the census entries shown -> ``key -> (window, allocating stack)``
#: (one call per census, so that a device's stacks are read once for all its entries)
Births = Callable[[list[Any]], "dict[int, tuple[str | None, tuple[StackFrame, ...]]]"]


class PeakCensus:
    """Takes the doctor's censuses (see the module docstring) and keeps their moments.

    Attributes:
        census: the census that feeds the capture's largest storages and bytes by role:
            the one at the failure, else the one at the peak (None before the first).
        step: the step of ``census``.
        moments: ``when`` -> :class:`HoldersMoment`.
        births: with ``--lines``: the entries shown -> their (window, allocating stack)
            by storage key (see :data:`Births`).
        walk: describe who holds the largest storages (False: censuses only, as
            ``torchmem lines`` takes them; it finds its holders itself).
    """

    def __init__(self, budget: float = BUDGET, rise: float = RISE, walk: bool = True) -> None:
        self.budget = budget
        self.rise = rise
        self.walk = walk
        self.census: Any = None
        self.step: int | None = None
        self.moments: dict[str, HoldersMoment] = {}
        self.births: Births | None = None
        self.spent = 0.0
        self._used: dict[str, int] = {}  # the reading at the last peak census
        self._first: dict[str, int] = {}  # the reading at the first step
        self._best: dict[str, tuple[int, int]] = {}  # device -> (highest reading, step)
        self._t0 = time.perf_counter()
        self.due_now = False
        # the highest evaluation reading, and the one at the last evaluation census
        self._eval: tuple[int, int | None] = (-1, None)
        # the pass in progress: its number, the state before it, the latest changes
        self._pass: tuple[int, tuple[Any, Any]] = (0, ((-1, None), None))
        self._changes: list[tuple[int, tuple[Any, Any]]] = []

    def due(self, used: dict[str, int], step: int) -> bool:
        """A peak census at this step boundary, whose reading is ``used``?"""
        self.due_now = self._due(used, step)
        return self.due_now

    def _due(self, used: dict[str, int], step: int) -> bool:
        if not self._first:
            self._first, self._t0 = dict(used), time.perf_counter()
        new_high = False  # at the highest reading so far, give or take MIN_RISE of noise
        for device, value in used.items():
            best = self._best.get(device, (-1, 0))[0]
            new_high = new_high or value >= best - MIN_RISE
            if value > best:
                self._best[device] = (value, step)
        if self.census is None:
            return True
        if not new_high or not any(
                v - self._used.get(d, 0) >= max(
                    MIN_RISE, RISE_OF_READING * self._used.get(d, 0),
                    self.rise * (self._used.get(d, 0) - self._first.get(d, 0)))
                for d, v in used.items()):
            return False
        doubling = step & (step - 1) == 0  # at most log2(steps) censuses outside the budget
        return doubling or self.spent < self.budget * (time.perf_counter() - self._t0)

    def take(self, when: str, step: int, used: dict[str, int], frame: FrameType | None,
             main_globals: dict[str, Any] | None, is_user: Callable[[str], bool],
             note: str | None = None) -> HoldersMoment:
        """Take a census now and describe its largest storages as the moment ``when``."""
        from torchmem.collect.census import census

        t0 = time.perf_counter()
        try:
            taken = census()
            moment = describe_census(taken, when, step, used, frame, main_globals, is_user,
                                     self.births, note, walk=self.walk)
        finally:
            self.spent += time.perf_counter() - t0
        if when == "peak" or (when in ("oom", "exception") and taken.storages) \
                or self.census is None:
            self.census, self.step = taken, step
        if when == "peak":
            self._used = dict(used)
        if self.walk:
            self.moments[when] = moment
        return moment

    def at_step(self, run: Any, step: int, frame: FrameType | None, last: bool) -> None:
        """At a step boundary: the peak census when due, and the end at ``last``
        (the last step of ``--steps``)."""
        used = dict(run.steps[-1].used) if run.steps else {}
        if not (self.due(used, step) and step >= 2) and not last:
            return
        is_user = run.frames.is_user_file
        if self.census is None or self.due_now:
            moment = self.take("peak", step, used, frame, run.main_globals, is_user)
            if last and self.walk:
                self.moments["end"] = replace(moment, when="end")
        else:
            self.take("end", step, used, frame, run.main_globals, is_user)

    def at_pass_step(self, run: Any, info: dict[str, Any]) -> None:
        """After a forward of an evaluation pass: the evaluation peak when its heap reading
        is a new high of the evaluation passes (same rule as at steps, counted in the
        pass's forwards); the forward's caller frames hold the pass's objects."""
        if not self.walk:
            return
        heap, index = info.get("heap"), int(info.get("index") or 0)
        counter = int(info.get("counter") or 0)  # forwards of all the passes so far
        best, last = self._eval
        number = int(info.get("pass") or 0)
        state = (self._eval, self.moments.get("eval_peak"))
        if number != self._pass[0]:
            self._pass, self._changes = (number, state), []
        if heap is None or index < 1 or heap <= best:
            return
        self._changes = [*self._changes[-63:], (counter, state)]
        self._eval = (heap, last)
        if last is not None:
            grown = max(last - self._first.get("cpu", 0), 0)
            rise = heap - last >= max(MIN_RISE, self.rise * grown)
            doubling = counter & (counter - 1) == 0
            if not rise or not (doubling or
                                self.spent < self.budget * (time.perf_counter() - self._t0)):
                return
        self._eval = (heap, heap)
        step = run.step_count
        self.take("eval_peak", step, {"cpu": int(heap)}, info.get("frame"), run.main_globals,
                  run.frames.is_user_file,
                  note=f"evaluation pass {info.get('pass')}, after its forward {index}")

    def drop_pass(self, info: dict[str, Any]) -> None:
        """The forwards of pass ``info["pass"]`` from ``info["from_counter"]`` on were a
        training step's: forget what they changed (highest reading, evaluation peak)."""
        number, since = int(info.get("pass") or 0), int(info.get("from_counter") or 0)
        if number != self._pass[0]:
            return
        state = None
        while self._changes and self._changes[-1][0] >= since:
            state = self._changes.pop()[1]
        if info.get("whole"):
            state, self._changes = self._pass[1], []
        if state is None:
            return
        self._eval, moment = state
        if moment is None:
            self.moments.pop("eval_peak", None)
        else:
            self.moments["eval_peak"] = moment

    def finish(self, run: Any, outcome: Any, step: int) -> None:
        """At the end of the run: at the failure point, or after the script's last
        statement (kept only when the script's variables still reach a storage)."""
        used = dict(run.steps[-1].used) if run.steps else {}
        is_user = run.frames.is_user_file
        if outcome.kind in ("oom", "exception", "interrupt") and outcome.frame is not None:
            when = "oom" if outcome.kind == "oom" else "exception"
            self.take(when, step, used, outcome.frame, run.main_globals, is_user)
            return
        if "end" in self.moments:
            return
        if not self.walk:
            if self.census is None:
                self.take("end", step, used, None, run.main_globals, is_user)
            return
        end = self.take("end", step, used, None, run.main_globals, is_user)
        if any(s.holders for s in end.storages):
            return
        del self.moments["end"]
        peak = self.moments.get("peak")
        if peak is not None:
            self.moments["peak"] = replace(peak, note=(
                "after the script's last statement the script's variables reached none "
                f"of the largest storages ({format_bytes(end.tensor_bytes)} of tensors "
                f"alive in all): the census at step {peak.step} stands for the end"))


def describe_census(census: Any, when: str, step: int, used: dict[str, int],
                    frame: FrameType | None, main_globals: dict[str, Any] | None,
                    is_user: Callable[[str], bool], births: Births | None = None,
                    note: str | None = None, top: int = TOP,
                    unowned: int = TOP_UNOWNED, walk: bool = True) -> HoldersMoment:
    """The largest storages of ``census`` with who holds them (the script's objects must
    still be alive: call it right after the census); ``walk=False``: the census alone."""
    from torchmem.doctor.holders_api import _roots, search

    if not walk:
        return HoldersMoment(when=when, step=max(int(step), 0), used=dict(used),
                             tensor_bytes=int(census.total_bytes))
    rank = {role: i for i, role in enumerate(ROLES)}

    def words(e: Any) -> tuple[Any, ...]:
        return (-e.nbytes, rank.get(e.role, len(rank)), e.name or "", e.device)

    ranked = sorted(census.storages, key=words)
    # candidates: the first `top` and the first `unowned` no module or optimizer owns, with
    # the storages that tie with the last of each (up to `top` of the latter may be shown
    # among the first)
    top_rows = _with_ties(ranked, top, words)
    free = [e for e in ranked if e.role not in _OWNED and e.nbytes >= MIN_UNOWNED]
    unowned_rows = _with_ties(free, unowned + top, words)
    walked: list[int] = []
    roots = _roots(frame, is_user, main_globals)
    try:
        found = search(roots, {e.key for e in top_rows + unowned_rows}, set(),
                       max_paths=MAX_PATHS, max_objects=MAX_OBJECTS, walked=walked,
                       is_user=is_user)
    finally:
        roots.clear()

    def by_path(e: Any) -> tuple[Any, ...]:  # equal in words: the first holder decides
        holders = found[e.key].holders if e.key in found else ()
        return (*words(e), _natural(holders[0].path) if holders else ((2, ""),))

    entries = sorted(top_rows, key=by_path)[:top]
    shown = {e.key for e in entries}
    entries += sorted((e for e in unowned_rows if e.key not in shown), key=by_path)[:unowned]
    visited = walked[0] if walked else 0
    complete = visited < MAX_OBJECTS
    made = births(entries) if births is not None else {}
    rows = []
    for e in entries:
        paths = tuple(HolderPath(path=h.path, kind=h.kind, detail=h.detail, file=h.file,
                                 line=h.line, code=h.code, function=h.function)
                      for h in (found[e.key].holders if e.key in found else ()))
        made_in, stack = made.get(e.key, (None, ()))
        rows.append(HeldStorage(
            nbytes=int(e.nbytes), device=e.device, dtype=e.dtype or "",
            shape=tuple(e.shapes[0]) if e.shapes else (), role=e.role, name=e.name,
            holders=paths, unreached=None if paths else _unreached(e, visited, complete),
            made_in=made_in, stack=stack))
    return HoldersMoment(when=when, step=max(int(step), 0), used=dict(used),
                         tensor_bytes=int(census.total_bytes), storages=tuple(rows),
                         walked=visited, complete=complete, lines=births is not None,
                         note=note)


#: storages equal in size, role and name to the last one shown that are searched too, so
#: that the ones shown are chosen by their holder's path, not by the census's order
MAX_TIES = 64


def _with_ties(ranked: list[Any], n: int, words: Callable[[Any], Any]) -> list[Any]:
    """The first ``n`` of ``ranked`` and those after them that tie with the n-th."""
    if len(ranked) <= n or n <= 0:
        return ranked[:max(n, 0)]
    last = words(ranked[n - 1])
    out = ranked[:n]
    for e in ranked[n:n + MAX_TIES]:
        if words(e) != last:
            break
        out.append(e)
    return out


def _natural(path: str) -> tuple[tuple[int, Any], ...]:
    """``epoch_logits[2]`` before ``epoch_logits[10]``: numbers compared as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r"(\d+)", path) if part)


def _unreached(entry: Any, walked: int, complete: bool) -> str:
    """Why no path is shown for ``entry``, with the evidence."""
    if not complete:
        return (f"no path found within the walk's budget ({walked:,} objects): one may "
                "exist beyond it")
    where = (f"no Python path from the script's variables reaches it ({walked:,} objects "
             "walked from the frames on the stack, the script's globals and its modules)")
    if entry.role == "activation":
        return (f"{where}; the census found it {entry.name or 'saved by a graph'}: an "
                "autograd graph that only autograd's C++ keeps alive (a graph whose output "
                "no variable holds, or the .grad cycle of backward(create_graph=True))")
    if entry.role == "gradient" and not entry.name:
        return (f"{where}; the census found it as the .grad of a leaf that no variable "
                "reaches: something outside Python keeps that leaf alive (e.g. after "
                "backward(create_graph=True) the leaf and its .grad's graph keep each other "
                "alive inside autograd)")
    if entry.name:
        return f"{where}; the census names it `{entry.name}` (its owner is not reachable " \
               "from the script's variables)"
    return (f"{where}: it is held outside Python (autograd's C++, a torch cache, a "
            "library, another thread) or by an object the walk does not open")
