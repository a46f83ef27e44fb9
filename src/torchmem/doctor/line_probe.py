"""The probe behind ``torchmem lines``: memory per source line, at a bounded cost.

Attributing every storage to its line needs the storage engine's dispatch mode (one
Python call per aten op), which costs far more than a training step on loops of many
tiny ops. So the probe profiles *some* steps exactly and lets the others run untouched:

* the setup (script start to the first optimizer step; without an optimizer, to the
  second ``backward()`` or third top-level forward, since the step source settles during
  the first iteration) and the first step after it are always profiled;
* then steps are profiled in *pairs* of consecutive steps (so that the storages of the
  first that the second frees have a line: the net change per line is taken from the
  second), a pair only while the time spent profiling (and on the doctor's analysis)
  stays within ``budget`` times the plain run time, estimated from the steps that were
  not profiled (``budget=0.4``: about 1.4x the plain run, plus the step hooks' own small
  cost per step, which that estimate cannot see); or the pair ending
  at every ``every``-th step when ``every`` is given; or every step when ``budget`` is
  None.

Each profiled step is an exact window of :class:`~torchmem.collect.lines.LineRecorder`
(CPU) and, when CUDA is in use, of :class:`~torchmem.collect.cuda_lines.CudaLineRecorder`.
The probe wraps the doctor's own probe and runs its analysis *between* windows, so the
doctor's work is never attributed to the script's lines. After the run, the doctor's
findings name the lines that keep a leak alive (:func:`retaining_rows`), and the census
the doctor takes at the step with the highest memory (or at an out-of-memory error) is
joined with the allocating stacks and the paths that hold those storages.

Cost outside profiled steps: the doctor's (a few attribute updates per step, and its
analysis at a few boundaries) plus one callback per free of a storage made in a
profiled step.
"""

from __future__ import annotations

import linecache
import statistics
import time
from types import FrameType
from typing import Any

from torchmem.analyze.line_windows import LineTotals, rank_rows, retaining_rows
from torchmem.collect.cuda_lines import CudaLineRecorder
from torchmem.collect.lines import LineRecorder
from torchmem.collect.sites import SiteFinder, is_user_file
from torchmem.doctor.line_sites import census_roles, census_sites, entry_births, peak_sites
from torchmem.doctor.runner import Outcome, Probe, Run
from torchmem.model.lines import AllocationSite, LineProfile, LineRecord, LineWindow

__all__ = ["LinesProbe", "source_line"]


def source_line(file: str, line: int) -> str:
    """The stripped source text of ``file:line`` ('' when unknown)."""
    try:
        return linecache.getline(file, line).strip() if line > 0 else ""
    except Exception:  # noqa: BLE001 - an odd file name
        return ""


class LinesProbe(Probe):
    """Profiles memory per line during a run (see the module docstring).

    Args:
        doctor: the doctor's probe to run between windows (None: no findings, census
            or holders).
        all_files: attribute to library lines too, not only the user's own files.
        every: profile every ``every``-th step (overrides ``budget``).
        budget: overhead budget as a fraction of the plain run time; None profiles
            every step.
        cuda: record CUDA lines when CUDA is in use.
        stack_min_bytes: keep whole stacks of storages at least this large.
    """

    def __init__(self, doctor: Any = None, *, all_files: bool = False,
                 every: int | None = None, budget: float | None = 0.4, cuda: bool = True,
                 stack_min_bytes: int = 4096) -> None:
        self.doctor = doctor
        self.all_files = all_files
        self.every = every
        self.budget = budget
        self.finder = SiteFinder(is_user_file, all_files, launched=True)
        self.cpu = LineRecorder(self.finder, stack_min_bytes)
        self.cuda = CudaLineRecorder(is_user_file, all_files) if cuda else None
        self.cuda_totals: dict[str, LineTotals] = {}
        self.cuda_peak: dict[str, list[Any]] = {}
        self.windows: list[LineWindow] = []
        self.sites: list[AllocationSite] = []
        self.notes: list[str] = []
        self.errors: list[str] = []
        self._open: tuple[str, int] | None = None  # (kind, step)
        self._paired = False
        self._lead_in = False  # the open (or just closed) step window starts a pair
        self._cut = False
        self._plain: list[float] = []
        self._spent = 0.0
        self._last_extra: float | None = None
        self._last = time.perf_counter()
        self._steps = 0
        self._first_pending = True
        self._census_seen: Any = None
        self._census_serial = 0

    # -- windows ------------------------------------------------------------------------
    def _begin(self, step: int, kind: str, paired: bool = True) -> None:
        self._cut = False
        self.cpu.begin(step, kind, paired)
        if self.cuda is not None:
            try:
                self.cuda.begin(step, paired)
            except Exception as err:  # noqa: BLE001 - CUDA lines are optional
                self._error("CUDA recording", err)
        self._open = (kind, step)
        self._paired = paired

    def _end(self, kind: str) -> float:
        """Close the open window as a window of ``kind``; return its wall time."""
        self._open = None
        before = self.cpu.peak_storages
        window = self.cpu.end(kind)
        seconds = window.seconds if window is not None else 0.0
        census = self._census_seen
        if census is not None and self.cpu.peak_storages is not before:
            try:  # a new peak: its storages that the latest census saw get their names
                census_roles(census, self.cpu, self._census_serial)
            except Exception as err:  # noqa: BLE001
                self._error("allocation sites", err)
        if window is not None:
            self.windows.append(LineWindow(
                step=window.step, kind=kind, paired=window.paired,
                delta_bytes=window.measured_delta or 0,
                peak_bytes=max(window.peak_bytes or 0, 0), allocated_bytes=window.allocated,
                unattributed_bytes=window.unattributed, seconds=round(seconds, 6)))
        if self.cuda is not None and self.cuda.active:
            try:
                for trace in self.cuda.end():
                    self._add_cuda(trace, kind)
            except Exception as err:  # noqa: BLE001
                self._error("CUDA snapshot", err)
        return seconds

    def _add_cuda(self, trace: Any, kind: str) -> None:
        tally = trace.tally
        tally.steady = kind == "step"
        totals = self.cuda_totals.setdefault(tally.device, LineTotals(tally.device))
        best = totals.peak.bytes if totals.peak is not None else -1
        peak = tally.peak(with_tokens=True)
        if peak.bytes > best:
            blocks = sorted(peak.tokens.values(), key=lambda bn: -bn[1])[:10]
            label = f"step {tally.step}" if kind == "step" else kind
            self.cuda_peak[tally.device] = [(n, block, tally.step, label) for block, n in blocks]
        peak.tokens = {}
        totals.add(tally, peak)
        self.windows.append(LineWindow(
            step=tally.step, kind=kind, paired=tally.paired,
            delta_bytes=tally.measured_delta or 0, peak_bytes=peak.bytes,
            allocated_bytes=tally.allocated, unattributed_bytes=tally.unattributed,
            device=tally.device))

    def _error(self, part: str, err: BaseException) -> None:
        self.errors.append(f"{part}: {type(err).__name__}: {err}")

    # -- sampling -------------------------------------------------------------------------
    def _profile_next(self, step: int, just_closed: bool) -> bool:
        """Profile step ``step + 1``? ``just_closed``: step ``step`` was profiled."""
        if self._first_pending:
            self._first_pending = False
            self._lead_in = False
            return True
        if just_closed and self._lead_in:
            self._lead_in = False  # the second step of the pair
            return True
        if self.budget is None and self.every is None:
            return True
        if self.every is not None:
            start = (step + 2) % self.every == 0
        elif not self._plain or self.budget is None:
            start = False
        else:
            plain = statistics.median(self._plain[-16:])
            expected = 2 * (self._last_extra if self._last_extra is not None else 4 * plain)
            start = self._spent + expected <= self.budget * plain * (step + 2)
        self._lead_in = start
        return start

    def _steady_seen(self) -> bool:
        return any(w.kind == "step" for w in self.windows)

    def _plain_estimate(self) -> float:
        return statistics.median(self._plain[-16:]) if self._plain else 0.0

    # -- probe hooks --------------------------------------------------------------------
    def on_start(self, run: Run) -> None:
        if self.doctor is not None:
            self.doctor.on_start(run)
            peaks = getattr(self.doctor, "peaks", None)
            if peaks is not None:  # the doctor's largest storages get their stacks
                peaks.births = lambda entries: entry_births(
                    entries, self.cpu, self.cuda.block_stacks if self.cuda is not None else None)
        self.cpu.install()
        self._begin(0, "setup")

    def on_event(self, run: Run, name: str, info: dict[str, Any]) -> None:
        if name == "step_source":
            self._cut = True  # an open step window spans the change: not a whole step
            self._first_pending = True
        if self.doctor is not None:
            self.doctor.on_event(run, name, info)

    @staticmethod
    def _settled(run: Run, step: int) -> bool:
        """The setup window may end here: the step source has settled."""
        source = run.step_source
        return source == "optimizer" or (source == "backward" and step >= 2) or step >= 3

    def on_step(self, run: Run, step: int, frame: FrameType | None) -> None:
        now = time.perf_counter()
        self._steps = step
        just_closed = False
        if self._open is not None:
            kind, opened = self._open
            if kind == "setup" and not self._settled(run, step):
                return  # the setup goes on until the step source settles
            whole = kind == "step" and step == opened and not self._cut
            just_closed = whole or kind == "setup"
            seconds = self._end("step" if whole else ("setup" if kind == "setup" or
                                                      not self._steady_seen() else "end"))
            if kind == "step":
                extra = max(seconds - self._plain_estimate(), 0.0)
                self._spent += extra
                self._last_extra = extra
        else:
            self._plain.append(now - self._last)
        t0 = time.perf_counter()
        if self.doctor is not None:
            self.doctor.on_step(run, step, frame)
            self._join_census(run, frame, step, "census")
        self._spent += time.perf_counter() - t0
        if self._profile_next(step, just_closed):
            self._begin(step + 1, "step", paired=just_closed)
        self._last = time.perf_counter()

    def on_finish(self, run: Run, outcome: Outcome) -> None:
        try:
            if self._open is not None:
                kind = self._open[0]
                self._end("setup" if kind == "setup" else "end")
            if self.doctor is not None:  # the ledger still knows where storages were made
                self.doctor.on_finish(run, outcome)
                when = "oom" if outcome.kind == "oom" else "census"
                self._join_census(run, outcome.frame, run.step_count, when)
        finally:
            self.cpu.uninstall()
        if self.cuda is not None:
            self.notes.extend(self.cuda.notes)

    def _join_census(self, run: Run, frame: FrameType | None, step: int, when: str) -> None:
        census = getattr(self.doctor, "census", None)
        if census is None or census is self._census_seen:
            return
        self._census_seen = census
        self._census_serial = self.cpu.serial
        try:
            census_roles(census, self.cpu, self._census_serial)
            stacks = self.cuda.block_stacks() if self.cuda is not None else None
            found = census_sites(census, when, getattr(self.doctor, "census_step", None) or step,
                                 self.cpu, frame, run.main_globals, run.frames.is_user_file,
                                 stacks)
        except Exception as err:  # noqa: BLE001 - never break the script
            self._error("allocation sites", err)
            return
        self.sites = [s for s in self.sites if s.when == "peak"] + found

    # -- results -------------------------------------------------------------------------
    def fill(self, capture: Any, findings: Any, steps: int) -> Any:
        """``capture`` with the lines and their profile (the doctor's findings mark the
        lines that keep a leak alive)."""
        import dataclasses

        return dataclasses.replace(capture, lines=tuple(self.rows(findings)),
                                   line_profile=self.profile(steps))

    def rows(self, findings: Any = ()) -> list[LineRecord]:
        """The ranked per-line records (the doctor's findings mark retaining lines)."""
        rows = self.cpu.totals.rows(source_line)
        for totals in self.cuda_totals.values():
            rows.extend(totals.rows(source_line))
        rows = [r for r in rows if r.allocated_bytes or r.peak_bytes or r.delta_bytes
                or r.alive_bytes]
        return rank_rows(retaining_rows(rows, findings, source_line))

    def profile(self, steps: int) -> LineProfile:
        """How the lines were measured, with the allocation sites."""
        totals = self.cpu.totals
        cpu_windows = [w for w in self.windows if w.device == "cpu" and w.kind == "step"]
        paired = [w for w in cpu_windows if w.paired]
        unattributed = (round(sum(w.unattributed_bytes for w in paired) / len(paired))
                        if paired else 0)
        sites = list(peak_sites(self.cpu, totals.peak_step))
        for device, blocks in self.cuda_peak.items():
            sites.extend(peak_sites_cuda(device, blocks))
        sites.extend(s for s in self.sites if s.when != "peak")
        notes = list(self.notes) + [f"lines analysis incomplete: {e}" for e in self.errors]
        if not cpu_windows:
            notes.append("no whole training step was profiled: the figures are those of "
                         "the setup window (the script start to its first steps)")
        return LineProfile(
            steps=max(steps, self._steps), profiled=tuple(self.windows),
            peak_step=totals.peak_step, peak_kind=self._peak_kind(totals.peak_step),
            peak_bytes=totals.peak.bytes if totals.peak else 0,
            unattributed_bytes=unattributed, all_files=self.all_files,
            budget=None if self.every is not None else self.budget, sites=tuple(sites),
            notes=tuple(notes))


    def _peak_kind(self, step: int | None) -> str:
        best = None
        for w in self.windows:
            if w.device == "cpu" and w.step == step and (best is None or w.peak_bytes > best.peak_bytes):
                best = w
        return best.kind if best is not None else "step"


def peak_sites_cuda(device: str, blocks: list[Any]) -> list[AllocationSite]:
    """Allocation sites of the largest CUDA blocks alive at a window's peak."""
    from torchmem.model.lines import StackFrame

    out = []
    for n, block, step, label in blocks:
        stack = tuple(StackFrame(file=f[0], line=f[1], function=f[2], user=f[3])
                      for f in block[3])
        out.append(AllocationSite(when="peak", step=step, nbytes=int(n), device=device,
                                  made_in=label,
                                  stack=_user_first(stack)))
    return out


def _user_first(stack: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(f for f in stack if f.user) + tuple(f for f in stack if not f.user)
