"""Plain-data helpers the integrations share: a capture of what they measured, the census
summary it lists, the findings as text, and the HTML report as an inline frame.

Nothing here imports a host (IPython, lightning, transformers).
"""

from __future__ import annotations

import html
import time
from datetime import datetime, timezone
from typing import Any, Sequence

from torchmem import __version__
from torchmem.model.capture import Capture, Finding, Growth, StepRecord

__all__ = ["make_capture", "findings_lines", "html_frame", "now_iso",
           "tracked_bytes"]


def now_iso() -> str:
    """The current UTC time as ISO-8601, as captures record ``started_at``."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def tracked_bytes(tracker: Any) -> tuple[int, int, int]:
    """``(at start, now or at the end, peak)`` of an entered :class:`torchmem.Tracker`.

    On the engine path (CPU) of an exact tracker these are live tensor bytes; on CUDA/XPU,
    bytes allocated by the caching allocator.
    """
    base = tracker.baseline
    start = base.allocated if tracker.source == "allocator" else base.tensor_bytes
    if start is None:
        start = base.used or 0
    return int(start), int(start + tracker.delta), int(start + tracker.peak_delta)


def _environment() -> dict[str, str]:
    try:
        from torchmem.doctor._summary import environment

        return environment()
    except Exception:  # noqa: BLE001 - a capture without its environment is still useful
        return {"torchmem": __version__}


def make_capture(tool: str, argv: Sequence[str], *, started: float, started_at: str,
                 outcome: str = "ok", error: str | None = None, step_source: str = "none",
                 devices: Sequence[str] = (), steps: Sequence[StepRecord] = (),
                 peak: dict[str, int] | None = None, growth: Sequence[Growth] = (),
                 findings: Sequence[Finding] = (), census: Any = None,
                 notes: Sequence[str] = ()) -> Capture:
    """A :class:`Capture` of an integration's measurement (``tool`` names the integration)."""
    from torchmem.doctor._summary import census_summary

    top, roles, modules = census_summary(census)
    return Capture(tool=tool, version=__version__, argv=tuple(str(a) for a in argv),
                   started_at=started_at, duration_s=max(time.perf_counter() - started, 0.0),
                   exit_code=0 if outcome == "ok" else 1, outcome=outcome, error=error,
                   step_source=step_source, devices=tuple(devices), steps=tuple(steps),
                   peak=dict(peak or {}), growth=tuple(growth), findings=tuple(findings),
                   top_storages=top, bytes_by_role=roles, bytes_by_module=modules,
                   notes=tuple(notes),
                   environment=_environment())


def findings_lines(findings: Sequence[Finding]) -> list[str]:
    """The findings as the CLI prints them (``[1] title``, culprit, evidence, fix, cause)."""
    if not findings:
        return []
    from torchmem.report.findings import findings_text

    capture = Capture(tool="torchmem", version=__version__, argv=(), started_at="",
                      duration_s=0.0, exit_code=0, outcome="ok", findings=tuple(findings))
    return findings_text(capture)[1:]  # without the doctor's growth headline


def html_frame(capture: Capture, height: int = 640) -> str:
    """The capture's HTML report inside an ``<iframe srcdoc>``: the report's own styles
    then cannot restyle the notebook page around it."""
    from torchmem.report.html import render_html

    page = render_html(capture)
    return (f'<div class="torchmem-report"><iframe srcdoc="{html.escape(page, quote=True)}" '
            f'title="torchmem report" style="width: 100%; height: {int(height)}px; '
            f'border: 1px solid #ddd;"></iframe></div>')
