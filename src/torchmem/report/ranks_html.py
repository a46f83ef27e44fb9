"""The merged report of every rank as one self-contained offline HTML page (no torch).

Inline CSS, no JavaScript, no external resource, as the single-run page
(:mod:`torchmem.report.html`): the verdicts on peaks and growth, one table row per rank
(peak, first and last step, growth per step, exit code, findings), memory at each step
boundary with one line per rank (inline SVG), the census roles with every rank's bytes,
and the findings compared across ranks. Every string of the report is escaped for the
terminal-safe form first (:mod:`torchmem.report.sanitize`: no bidi overrides or control
characters) and then HTML-escaped by jinja2's autoescaping.

Example:
    >>> from torchmem.model.rank_report import MergedRankReport, RankSummary
    >>> page = render_rank_html(MergedRankReport("torchmem run", ("t.py",), 1,
    ...                                          (RankSummary(0, "a.json", "cpu", "C heap"),)))
    >>> page.startswith("<!DOCTYPE html>")
    True
"""

from __future__ import annotations

from typing import Any

from torchmem.model.rank_report import MergedRankReport
from torchmem.report.html import CAUSE_TITLES, _environment
from torchmem.report.ranks_text import growth_verdict, peak_verdict
from torchmem.report.sanitize import printable_capture
from torchmem.report.svg import PALETTE, Series, line_chart
from torchmem.units import format_bytes

__all__ = ["render_rank_html", "TEMPLATE"]

#: the template of the page, next to the single-run one
TEMPLATE = "ranks.html.j2"


def _chart(report: MergedRankReport) -> str | None:
    series = [Series(f"rank {r.rank} ({r.device})", list(r.step_numbers), list(r.step_used),
                     color=PALETTE[i % len(PALETTE)], points=len(r.step_numbers) <= 60)
              for i, r in enumerate(report.ranks) if len(r.step_numbers) >= 1]
    if not series:
        return None
    return line_chart(series, x_label="step", y_format=format_bytes,
                      title="memory at each step boundary, one line per rank")


def render_rank_html(report: MergedRankReport) -> str:
    """Return the merged report of every rank as one HTML string.

    Args:
        report: what :func:`torchmem.analyze.ranks.merge_ranks` returned.

    Returns:
        A complete, self-contained HTML document (inline CSS and SVG, no scripts).
    """
    from markupsafe import Markup

    report = printable_capture(report)
    chart = _chart(report)
    findings: list[dict[str, Any]] = [
        {"n": i + 1, "f": f, "title": f.title or CAUSE_TITLES.get(f.cause, f.cause),
         "per_rank": list(zip(f.ranks, f.bytes, f.bytes_per_step))}
        for i, f in enumerate(report.findings)]
    roles = [{"s": s, "cells": [(n, bool(s.spread) and k.rank == s.heaviest)
                                for k, n in zip(report.ranks, s.bytes)]}
             for s in report.roles]
    context = {
        "r": report,
        "script": report.script,
        "args": list(report.argv[1:]),
        "peak_verdict": peak_verdict(report),
        "growth_verdict": growth_verdict(report),
        "chart": Markup(chart) if chart else None,
        "findings": findings,
        "roles": roles,
        "version": _version(),
    }
    return str(_environment().get_template(TEMPLATE).render(**context))


def _version() -> str:
    from torchmem import __version__

    return __version__
