"""A :class:`~torchmem.model.snapshot.SnapshotReport` as one self-contained offline HTML page.

Inline CSS, no JavaScript, no external resource, like the capture's page
(:mod:`torchmem.report.html`): per device, the timeline of allocated and reserved bytes
over the trace as inline SVG with the peak marked, the figures, the growth and allocator
verdicts, the flushes and out-of-memory events, and the allocations alive at the peak
with their stacks (the script's frames first; the library and C++ frames folded); then
the findings with evidence and fix, the allocator settings and the notes. Every string
from the snapshot is made printable first (:mod:`torchmem.report.sanitize`) and then
HTML-escaped by jinja2's autoescaping.

Example:
    >>> from torchmem.model.snapshot import SnapshotReport
    >>> render_snapshot_html(SnapshotReport("s.pickle", 10, "0")).startswith("<!DOCTYPE html>")
    True
"""

from __future__ import annotations

from typing import Any

from torchmem.model.snapshot import DeviceSnapshot, SnapshotReport
from torchmem.report.html import CAUSE_TITLES, _environment
from torchmem.report.sanitize import printable_capture
from torchmem.report.snapshot_text import short_path
from torchmem.report.svg import Series, line_chart
from torchmem.units import format_bytes

__all__ = ["render_snapshot_html", "TEMPLATE"]

#: the template of the page, next to the capture's
TEMPLATE = "snapshot.html.j2"


def _chart(d: DeviceSnapshot) -> str | None:
    t = d.timeline.get("t", [])
    if len(t) < 2:
        return None
    unit = "seconds into the trace" if d.timeline_unit == "s" else "trace entry"
    series = [Series("allocated (highest per interval)", t, d.timeline["allocated"]),
              Series("reserved", t, d.timeline["reserved"], dashed=True)]
    at = d.peak_at_s if d.timeline_unit == "s" else float(d.peak_entry)
    if d.entries and at is not None:
        series.append(Series(f"peak {format_bytes(d.peak_allocated)}", [at],
                             [d.peak_allocated], points=True, color="#b3261e"))
    return line_chart(series, x_label=unit, y_format=format_bytes,
                      title=f"{d.device}: memory over the trace")


def _device_view(d: DeviceSnapshot) -> dict[str, Any]:
    from markupsafe import Markup

    chart = _chart(d)
    return {"d": d, "chart": Markup(chart) if chart else None,
            "actions": sorted(d.actions.items(), key=lambda kv: -kv[1])}


def render_snapshot_html(report: SnapshotReport) -> str:
    """Return the page of ``report`` as one HTML string (inline CSS and SVG, no scripts)."""
    report = printable_capture(report)
    findings = [{"rank": i + 1, "f": f, "title": f.title or CAUSE_TITLES.get(f.cause, f.cause),
                 "data": sorted((str(k), str(v)) for k, v in f.data.items())}
                for i, f in enumerate(report.findings)]
    context = {"r": report, "short": short_path, "devices": [_device_view(d) for d in report.devices],
               "findings": findings,
               "settings": sorted((k, str(v)) for k, v in report.allocator_settings.items()),
               "entries": sum(d.entries for d in report.devices)}
    return str(_environment().get_template(TEMPLATE).render(**context))
