"""The plain-data result of a finished run, and how it becomes a capture.

:func:`build_result` turns a finished :class:`~torchmem.doctor.runner.Run` and its
:class:`~torchmem.doctor._ending.Outcome` into a :class:`RunResult` (the script's objects
are gone by then); :meth:`RunResult.to_capture` makes the versioned capture of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from torchmem import __version__
from torchmem.doctor._ending import Outcome
from torchmem.doctor._stop import SIGTERM_EXIT_CODE
from torchmem.doctor._summary import environment, peaks, timeline_series
from torchmem.model.capture import Capture, Finding, Growth, Phase, StepRecord, StorageSummary

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.doctor.runner import Run

__all__ = ["RunResult", "build_result"]


@dataclass
class RunResult:
    """What a run produced (plain data; the script's objects are gone)."""

    exit_code: int
    outcome: str
    error: str | None
    argv: list[str]
    started_at: str
    duration_s: float
    steps: list[StepRecord]
    step_source: str
    devices: list[str]
    peak: dict[str, int]
    timeline: dict[str, list[float]] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)

    def to_capture(self, tool: str, *, findings: Sequence[Finding] = (),
                   growth: Sequence[Growth] = (), top_storages: Sequence[StorageSummary] = (),
                   bytes_by_role: dict[str, int] | None = None,
                   bytes_by_module: dict[str, int] | None = None,
                   notes: Sequence[str] = ()) -> Capture:
        """Build the versioned :class:`Capture` of this run."""
        return Capture(
            tool=tool, version=__version__, argv=tuple(self.argv), started_at=self.started_at,
            duration_s=round(self.duration_s, 4), exit_code=self.exit_code, outcome=self.outcome,
            error=self.error, step_source=self.step_source, devices=tuple(self.devices),
            steps=tuple(self.steps), peak=dict(self.peak), timeline=dict(self.timeline),
            growth=tuple(growth), findings=tuple(findings), top_storages=tuple(top_storages),
            bytes_by_role=dict(bytes_by_role or {}), bytes_by_module=dict(bytes_by_module or {}),
            notes=tuple(self.notes) + tuple(notes),
            environment=dict(self.environment), phases=tuple(self.phases),
        )


def build_result(run: Run, outcome: Outcome, started_at: str) -> RunResult:
    """The plain-data :class:`RunResult` of a finished ``run`` (used by :func:`run_script`
    and by :class:`torchmem.doctor.session.DoctorSession`)."""
    notes = [f"probe error: {e}" for e in run.probe_errors]
    thinned = run.step_log.note()
    if thinned:
        notes.append(thinned)
    if outcome.kind == "terminated":
        notes.append(f"the script was stopped by SIGTERM; exit code {SIGTERM_EXIT_CODE} "
                     "(128 + 15), the report covers what ran")
    phases: list[Phase] = []
    try:
        from torchmem.analyze.growth import growth_by_device

        cpu = next((g for g in growth_by_device(run.steps) if g.device == "cpu"), None)
        phases = run.phases.summaries(run.step_source, run.steps, cpu)
    except Exception as err:  # noqa: BLE001 - a summary must never lose the run
        notes.append(f"probe error: phases: {type(err).__name__}: {err}")
    return RunResult(
        exit_code=outcome.exit_code, outcome=outcome.kind, error=outcome.error,
        argv=list(run.argv), started_at=started_at, duration_s=time.time() - run.started,
        steps=list(run.steps), step_source=run.step_source, devices=sorted(run.devices),
        peak=peaks(run), timeline=timeline_series(run.timelines), environment=environment(),
        notes=notes, phases=phases,
    )
