"""What both trainer callbacks measure, independent of the trainer: the doctor's session
over the training steps, one tracker per phase, the figures to log, the capture to write.

:class:`TrainerMonitor` is driven by the Lightning and Hugging Face callbacks
(:mod:`torchmem.integrations.lightning`, :mod:`torchmem.integrations.huggingface`):

* ``begin(namespace)``: a :class:`torchmem.DoctorSession` over the training run (the
  doctor's per-step reading and its analysis at steps 2, 3, 4, 6, 8, 12, 16...);
* ``phase_begin(name)`` / ``phase_end(name)``: a :class:`torchmem.Tracker` per phase
  (``train``, ``validation``, ``test``, ``predict``): its peak is the phase's peak;
* ``step()``: one step boundary; returns the figures to log (``torchmem/live_bytes``,
  ``torchmem/peak_bytes``, ``torchmem/growth_per_step``);
* ``end(path)``: the capture (findings, growth, steps, phase peaks as notes), written as
  JSON when a path is given.

Nothing here raises into the training loop: a failure inside torchmem becomes a note of
the capture (``analysis incomplete: ...``).

Cost: per step one heap reading and the probe's bookkeeping (tens of us), plus the
deep analysis at ``~2 * log2(steps)`` boundaries (a walk of what the model and the
caller's variables reach; a census at new memory highs). With ``phase_peaks`` on the CPU,
every aten op also costs one Python call (the tracker's dispatch-mode engine); on CUDA the
phase peaks come from the allocator's counters at no per-op cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from torchmem.integrations import _capture
from torchmem.units import format_bytes, format_delta

__all__ = ["PHASES", "PhasePeak", "TrainerMonitor"]

PHASES = ("train", "validation", "test", "predict")
_MAX_POINTS = 256  # the per-step series kept for the growth figure (thinned beyond)


@dataclass(frozen=True)
class PhasePeak:
    """The peak of one phase (the highest over its runs, e.g. every validation loop).

    Attributes:
        phase: ``train``, ``validation``, ``test`` or ``predict``.
        device: the device tracked.
        peak: highest bytes during the phase (CPU: live tensor bytes; CUDA: allocated).
        above_start: that peak minus the bytes at the start of the run that reached it.
        kept: bytes the last run left alive at its end, relative to its start.
        runs: how many times the phase ran.
    """

    phase: str
    device: str
    peak: int
    above_start: int
    kept: int
    runs: int = 1

    def sentence(self) -> str:
        runs = f" over {self.runs} runs" if self.runs > 1 else ""
        return (f"peak of the {self.phase} phase on {self.device}: {format_bytes(self.peak)} "
                f"({format_delta(self.above_start)} above its start{runs}); "
                f"{format_delta(self.kept)} left alive at its end")


class TrainerMonitor:
    """The measurement behind the trainer callbacks (see the module docstring).

    Args:
        tool: the capture's ``tool`` (``"torchmem lightning"``).
        deep: the doctor's analysis of what the model and the caller's variables hold
            (False: per-step readings and the growth verdict only).
        phase_peaks: track each phase's peak (see the cost in the module docstring).
        device: the device to track (default: the current accelerator if one is
            initialised when the phase begins, else the CPU).
    """

    def __init__(self, tool: str, *, deep: bool = True, phase_peaks: bool = True,
                 device: str | None = None) -> None:
        self.tool = tool
        self.deep = deep
        self.phase_peaks_on = phase_peaks
        self.device = device
        self.capture: Any = None
        self.phase_peaks: dict[str, PhasePeak] = {}
        self.notes: list[str] = []
        self._session: Any = None
        self._begun = False
        self._trackers: dict[str, Any] = {}
        self._points: list[tuple[int, float]] = []
        self._stride = 1
        self._steps = 0
        self._started = time.perf_counter()
        self._started_at = _capture.now_iso()

    # -- failures --------------------------------------------------------------------------
    def note(self, part: str, err: BaseException) -> None:
        """Record a failure inside torchmem as a note of the capture (never raises)."""
        line = f"analysis incomplete: {part}: {type(err).__name__}: {err}".splitlines()[0]
        if line not in self.notes:
            self.notes.append(line)

    # -- the session -------------------------------------------------------------------------
    def begin(self, namespace: Mapping[str, Any], label: str) -> None:
        """Start the doctor's session over the steps to come (a second call does nothing)."""
        if self._begun:
            return
        self._begun = True
        self._started, self._started_at = time.perf_counter(), _capture.now_iso()
        try:
            from torchmem.doctor.session import DoctorSession

            session = DoctorSession(namespace=dict(namespace), deep=self.deep, label=label)
            session.start()
            self._session = session
        except Exception as err:  # noqa: BLE001 - e.g. another session is active
            self.note("doctor session", err)

    def step(self) -> dict[str, float]:
        """One step ended: the session's reading and analysis; the figures to log."""
        self._steps += 1
        if self._session is not None:
            self._session.step()  # never raises
        figures: dict[str, float] = {}
        try:
            tracker = self._trackers.get("train")
            if tracker is not None:
                _, now, peak = _capture.tracked_bytes(tracker)
                figures["torchmem/live_bytes"] = float(now)
                figures["torchmem/peak_bytes"] = float(peak)
                self._add_point(self._steps, float(now))
        except Exception as err:  # noqa: BLE001
            self.note("step figures", err)
        return figures

    @property
    def in_session(self) -> bool:
        """``begin()`` was called and ``end()`` not yet (the session may have failed to
        start: then steps are counted without the doctor's analysis)."""
        return self._begun and self.capture is None

    @property
    def steps(self) -> int:
        """Steps seen so far."""
        return self._steps

    def growth_per_step(self) -> float | None:
        """Live bytes gained per step (the doctor's robust slope; None before 4 steps)."""
        if len(self._points) < 4:
            return None
        from torchmem.analyze.growth import step_rate

        return step_rate(self._points)

    def _add_point(self, step: int, value: float) -> None:
        if step % self._stride:
            return
        self._points.append((step, value))
        if len(self._points) > _MAX_POINTS:  # keep every other point: bounded, still even
            self._stride *= 2
            self._points = [p for p in self._points if p[0] % self._stride == 0]

    # -- phases --------------------------------------------------------------------------------
    def phase_begin(self, phase: str) -> None:
        """Start tracking ``phase`` (nested phases, such as validation during training,
        each get their own peak)."""
        if not self.phase_peaks_on or phase in self._trackers:
            return
        try:
            from torchmem.collect.readings import default_device
            from torchmem.collect.tracker import Tracker

            device = self.device or default_device()
            tracker = Tracker(device, exact=not device.startswith(("cuda", "xpu")))
            tracker.__enter__()
            self._trackers[phase] = tracker
        except Exception as err:  # noqa: BLE001
            self.note(f"{phase} phase tracker", err)

    def phase_end(self, phase: str, name: str | None = None) -> PhasePeak | None:
        """Stop tracking ``phase``; return its peak, recorded under ``name`` (default:
        ``phase``) and merged with that phase's earlier runs."""
        tracker = self._trackers.pop(phase, None)
        if tracker is None:
            return None
        try:
            tracker.__exit__(None, None, None)
            start, end, peak = _capture.tracked_bytes(tracker)
        except Exception as err:  # noqa: BLE001
            self.note(f"{phase} phase tracker", err)
            return None
        name = name or phase
        before = self.phase_peaks.get(name)
        result = PhasePeak(name, tracker.device, peak, peak - start, end - start)
        if before is not None:
            best = result if result.peak >= before.peak else before
            result = replace(best, kept=result.kept, runs=before.runs + 1)
        self.phase_peaks[name] = result
        return result

    def close_phases(self) -> None:
        """End every phase still tracked (after an exception, or at the end)."""
        for phase in list(self._trackers):
            self.phase_end(phase)

    # -- the end -------------------------------------------------------------------------------
    def end(self, path: str | Path | None = None, exc: BaseException | None = None) -> Any:
        """Stop every tracker, finish the session, and return the capture (written as JSON
        to ``path`` when one is given). ``exc``: the exception that ended the training
        (the capture's outcome, and the doctor's explanation of an out-of-memory error).
        A second call returns the same capture."""
        if self.capture is not None:
            return self.capture
        self.close_phases()
        capture = None
        session, self._session = self._session, None
        if session is not None:
            try:
                if exc is not None:
                    session.__exit__(type(exc), exc, exc.__traceback__)
                    capture = session.capture
                else:
                    capture = session.finish()
            except Exception as err:  # noqa: BLE001
                self.note("doctor session", err)
            del session
        notes = [p.sentence() for p in self.phase_peaks.values()]
        rate = self.growth_per_step()
        if rate is not None:
            notes.append(f"live tensor bytes change by {format_delta(rate)} per step "
                         f"(over {self._steps} steps)")
        notes += self.notes
        if capture is None:
            peak = {p.device: max(p.peak, 0) for p in self.phase_peaks.values()}
            capture = _capture.make_capture(self.tool, [self.tool], started=self._started,
                                            started_at=self._started_at, peak=peak,
                                            devices=tuple(peak), notes=notes)
        else:
            capture = replace(capture, tool=self.tool, notes=tuple(capture.notes) + tuple(notes))
        self.capture = capture
        if path is not None:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                capture.save(path)
            except Exception as err:  # noqa: BLE001 - the training itself succeeded
                self.note(f"writing {path}", err)
                self.capture = capture = replace(capture, notes=capture.notes + (self.notes[-1],))
        return capture

    def report(self) -> str:
        """The findings (or the absence of findings) and the phase peaks, as text."""
        capture = self.capture
        if capture is None:
            return ""
        lines = [f"{self.tool}: " + (f"{len(capture.findings)} finding(s)" if capture.findings
                                     else "no findings") + f" over {self._steps} steps"]
        lines += _capture.findings_lines(capture.findings)
        lines += [p.sentence() for p in self.phase_peaks.values()]
        lines += [n for n in capture.notes if n.startswith("analysis incomplete")]
        return "\n".join(lines)
