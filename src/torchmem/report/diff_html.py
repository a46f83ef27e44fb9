"""A :class:`~torchmem.analyze.diff.CaptureDiff` as one self-contained offline HTML page.

``torchmem diff a.json b.json --html diff.html`` writes what the terminal report shows,
with every row instead of the top ten: the two inputs, the peak and growth per device side
by side, the memory at each step boundary of both runs on one chart (inline SVG; captures
only, a snapshot has no steps), the bytes by role, by module and by line, the findings that
appeared, vanished or changed, what explains the difference and the ``--fail-over`` limits
exceeded. Inline CSS, no JavaScript, no external resource, as the single-run page
(:mod:`torchmem.report.html`). Every string from an input is made terminal-safe first
(:mod:`torchmem.report.sanitize`) and then HTML-escaped by jinja2's autoescaping. Never
imports torch.

Example:
    >>> from torchmem.analyze.diff import diff_captures
    >>> from torchmem.model.capture import Capture
    >>> run = Capture(tool="torchmem run", version="0", argv=("t.py",), started_at="",
    ...               duration_s=0.0, exit_code=0, outcome="ok")
    >>> render_diff_html(diff_captures(run, run)).startswith("<!DOCTYPE html>")
    True
"""

from __future__ import annotations

from typing import Any, Sequence

from torchmem.analyze.diff import CaptureDiff, Row
from torchmem.report.diff import change_text, figure_text, headline_rows, line_cell_text
from torchmem.report.html import _environment
from torchmem.report.sanitize import printable_capture
from torchmem.report.svg import PALETTE, Series, line_chart
from torchmem.units import format_bytes, format_delta

__all__ = ["render_diff_html", "TEMPLATE"]

#: the template of the page, next to the single-run one
TEMPLATE = "diff.html.j2"


def _chart(diff: CaptureDiff) -> str | None:
    series = []
    devices = sorted(set(diff.a.series) | set(diff.b.series))
    for i, device in enumerate(devices):
        for name, side, dashed in (("a", diff.a, True), ("b", diff.b, False)):
            points = side.series.get(device, ())
            if len(points) >= 2:
                series.append(Series(f"{name} {device}", [p[0] for p in points],
                                     [p[1] for p in points], dashed=dashed,
                                     points=len(points) <= 60,
                                     color=PALETTE[i % len(PALETTE)]))
    if not series:
        return None
    return line_chart(series, x_label="step", y_format=format_bytes,
                      title="memory at each step boundary: a dashed, b solid")


def _rows(rows: Sequence[Row]) -> list[dict[str, str]]:
    return [{"key": r.key, "a": figure_text(r.a), "b": figure_text(r.b),
             "change": change_text(r)} for r in rows]


def render_diff_html(diff: CaptureDiff, limits_text: Sequence[str] = ()) -> str:
    """Return the diff as one HTML string.

    Args:
        diff: what :func:`torchmem.analyze.diff.diff_captures` returned.
        limits_text: the ``--fail-over`` lines the diff exceeded.

    Returns:
        A complete, self-contained HTML document (inline CSS and SVG, no scripts).
    """
    from markupsafe import Markup

    from torchmem import __version__

    diff = printable_capture(diff)
    chart = _chart(diff)
    peak = diff.a.line_measure == "peak"
    lines = [{"where": r.where, "code": r.code.strip(),
              "a": line_cell_text(r.allocated_a, r.alive_a, peak),
              "b": line_cell_text(r.allocated_b, r.alive_b, peak),
              "change": format_delta(r.change)} for r in diff.lines if r.change]
    source = diff.b.module_source or diff.a.module_source
    context: dict[str, Any] = {
        "d": diff,
        "sides": [("a", diff.a), ("b", diff.b)],
        "headline": headline_rows(diff),
        "chart": Markup(chart) if chart else None,
        "roles": _rows([r for r in diff.roles if r.a or r.b]),
        "modules": _rows([r for r in diff.modules if r.change]),
        "modules_unchanged": sum(1 for r in diff.modules if not r.change),
        "module_source": source if source and source != "capture" else "",
        "lines": lines,
        "line_measure": ("alive at the peak" if peak
                         else "allocated / alive at step end"),
        "findings": [{"c": c, "size": " -> ".join(format_bytes(x) for x in (c.bytes_a, c.bytes_b)
                                                  if x is not None)} for c in diff.findings],
        "limits": [str(printable_capture(t)) for t in limits_text],
        "version": __version__,
    }
    return str(_environment().get_template(TEMPLATE).render(**context))

