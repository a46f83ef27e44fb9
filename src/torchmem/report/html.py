"""Render a :class:`~torchmem.model.capture.Capture` as one self-contained offline HTML page.

The page has inline CSS, no JavaScript and no external resource: the memory timeline per
step (and the sampled timeline when the capture has one) is drawn as inline SVG by
:mod:`torchmem.report.svg`. It shows the run (script, outcome, exit code), the growth
verdict per device, the doctor's findings (cause, culprit with ``file:line`` and code,
bytes, growth per step, evidence, fix), the peak per device, the largest live storages
and the bytes by role. Every string from the capture (script path, arguments, culprit
names, code, evidence, error messages) is HTML-escaped by jinja2's autoescaping; the SVG
is escaped where it is built. Never imports torch.

Example:
    >>> from torchmem.model.capture import Capture
    >>> page = render_html(Capture(tool="torchmem doctor", version="0", argv=("t.py",),
    ...                            started_at="", duration_s=0.0, exit_code=0, outcome="ok"))
    >>> page.startswith("<!DOCTYPE html>")
    True

Known limitations:
    * Very long runs are drawn with every step as one polyline point; the page stays small
      (a few bytes per step) but tooltips are only drawn for runs of up to 400 steps.
"""

from __future__ import annotations

import importlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from torchmem._files import write_file
from torchmem.model.capture import CAUSES, Capture, Finding
from torchmem.report.svg import Series, line_chart
from torchmem.units import format_bytes, format_delta

__all__ = ["render_html", "write_html", "CAUSE_TITLES"]

TEMPLATES = Path(__file__).resolve().parent / "templates"

#: Human title of each cause class, used when a finding has no title of its own.
CAUSE_TITLES: dict[str, str] = {
    "retained_graph": "retained autograd graph",
    "hidden_state_chain": "hidden state carried without detach()",
    "backward_flags_graph": "graph kept by retain_graph/create_graph",
    "eval_graph": "evaluation building autograd graphs",
    "view_pins_storage": "small view pinning a large storage",
    "reference_cycle": "tensors held by reference cycles",
    "growing_container": "container growing without bound",
    "grad_not_cleared": "gradients never cleared",
    "untracked_growth": "memory no Python variable holds",
    "fragmentation": "allocator fragmentation",
    "cache_thrash": "allocator cache thrash (empty_cache)",
}

_OUTCOME_TEXT = {
    "ok": "finished normally",
    "max_steps": "stopped cleanly after the requested number of steps (--steps)",
    "exit": "called sys.exit",
    "interrupt": "was interrupted (Ctrl-C); the report covers what ran",
    "terminated": "was stopped by SIGTERM; the report covers what ran",
    "oom": "ran out of memory; the report shows the state at the failure",
    "exception": "raised an exception; the report covers what ran",
}


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["bytes"] = lambda n: format_bytes(n) if n is not None else "n/a"
    env.filters["delta"] = lambda n: format_delta(n) if n is not None else "n/a"
    return env


def _headline(capture: Capture) -> str:
    try:
        findings: Any = importlib.import_module("torchmem.report.findings")
    except ImportError:  # pragma: no cover - findings.py ships with torchmem
        findings = None
    if findings is not None:
        try:
            return str(findings.headline(capture))
        except Exception:  # noqa: BLE001 - a rendering helper must not break the page
            pass
    growing = [g for g in capture.growth if g.verdict == "growing"]
    if growing:
        g = growing[0]
        return (f"memory grows by {format_delta(g.bytes_per_step)} per step "
                f"(steps {g.first_step}-{g.last_step}, R^2 {g.r2:.2f}) on {g.device}")
    return "no memory growth found" if capture.growth else "no growth verdict recorded"


def _where(finding: Finding) -> str | None:
    culprit = finding.culprit
    if culprit is None or not culprit.file:
        return None
    name = os.path.basename(culprit.file)
    return f"{name}:{culprit.line}" if culprit.line else name


def _finding_view(rank: int, finding: Finding) -> dict[str, Any]:
    return {
        "rank": rank,
        "f": finding,
        "title": finding.title or CAUSE_TITLES.get(finding.cause, finding.cause),
        "where": _where(finding),
        "known_cause": finding.cause in CAUSES,
        "data": sorted((str(k), _plain(v)) for k, v in finding.data.items()),
        "fix_label": _fix_label(finding),
        "verification": _verification(finding),
    }


def _fix_label(finding: Finding) -> str:
    try:
        from torchmem.report.findings import fix_label
    except ImportError:  # pragma: no cover - findings.py ships with torchmem
        return "fix"
    return fix_label(finding)


def _verification(finding: Finding) -> str | None:
    try:
        from torchmem.report.findings import verification_text
    except ImportError:  # pragma: no cover - findings.py ships with torchmem
        return None
    return verification_text(finding)


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def _device_rows(capture: Capture) -> list[dict[str, Any]]:
    rows = []
    growth = {g.device: g for g in capture.growth}
    for device in capture.devices:
        used = [s.used[device] for s in capture.steps if device in s.used]
        reserved = [s.reserved[device] for s in capture.steps if device in s.reserved]
        rows.append({
            "device": device,
            "measure": "C heap in use" if device == "cpu" else "allocated",
            "peak": capture.peak.get(device),
            "first": used[0] if used else None,
            "last": used[-1] if used else None,
            "reserved_last": reserved[-1] if reserved else None,
            "growth": growth.get(device),
        })
    return rows


def _step_chart(capture: Capture) -> str:
    series: list[Series] = []
    for device in capture.devices:
        points = [(s.step, s.used[device]) for s in capture.steps if device in s.used]
        if not points:
            continue
        label = f"{device} ({'C heap in use' if device == 'cpu' else 'allocated'})"
        series.append(Series(label, [p[0] for p in points], [p[1] for p in points],
                             points=True))
        reserved = [(s.step, s.reserved[device]) for s in capture.steps if device in s.reserved]
        if reserved:
            series.append(Series(f"{device} reserved", [p[0] for p in reserved],
                                 [p[1] for p in reserved], dashed=True))
    for g in capture.growth:
        if g.verdict != "growing" or g.last_step <= g.first_step:
            continue
        at = {s.step: s.used.get(g.device) for s in capture.steps}
        start = at.get(g.first_step)
        if start is None:
            continue
        end = start + g.bytes_per_step * (g.last_step - g.first_step)
        series.append(Series(f"{g.device} fit {format_delta(g.bytes_per_step)}/step",
                             [g.first_step, g.last_step], [start, end], dashed=True,
                             color="#555"))
    return line_chart(series, x_label="step", y_format=format_bytes,
                      title="memory at each step boundary")


def _sampled_chart(capture: Capture) -> str | None:
    t = capture.timeline.get("t")
    if not t:
        return None
    series = [Series(k, t, v) for k, v in capture.timeline.items()
              if k not in ("t", "step") and len(v) == len(t)]
    if not series:
        return None
    return line_chart(series, x_label="seconds", y_format=format_bytes,
                      title="sampled memory over time")


def _roles(capture: Capture) -> list[dict[str, Any]]:
    total = sum(v for v in capture.bytes_by_role.values() if v > 0)
    rows = []
    for role, n in sorted(capture.bytes_by_role.items(), key=lambda kv: -kv[1]):
        share = (100.0 * n / total) if total else 0.0
        rows.append({"role": role, "bytes": n, "share": share})
    return rows


def _failures(capture: Capture) -> list[str]:
    try:
        from torchmem.report.findings import analysis_failures
    except ImportError:  # pragma: no cover - findings.py ships with torchmem
        return [n for n in capture.notes if n.startswith(("analysis incomplete:", "probe error:"))]
    return analysis_failures(capture)


def _lines(capture: Capture) -> dict[str, Any] | None:
    """The context of the per-line section (``torchmem lines``), or None."""
    if not capture.lines and capture.line_profile is None:
        return None
    try:
        from torchmem.report.lines import lines_context
    except ImportError:  # pragma: no cover - ships with torchmem
        return None
    # with the doctor's holders section, its census and OOM storages are listed there
    return lines_context(capture, ("peak",) if capture.holders else ("oom", "peak", "census"))


def _holders(capture: Capture) -> dict[str, Any] | None:
    """The context of the "who holds the largest storages" section (doctor), or None."""
    from torchmem.report.holders import holders_context

    return holders_context(capture)


def render_html(capture: Capture) -> str:
    """Return the report page of ``capture`` as one HTML string.

    Args:
        capture: what ``torchmem run`` or ``torchmem doctor`` recorded.

    Returns:
        A complete, self-contained HTML document (inline CSS and SVG, no scripts).
    """
    from markupsafe import Markup

    findings = sorted(capture.findings, key=lambda f: -f.bytes)
    context = {
        "c": capture,
        "script": capture.argv[0] if capture.argv else "?",
        "args": list(capture.argv[1:]),
        "headline": _headline(capture),
        "outcome_text": _OUTCOME_TEXT.get(capture.outcome, capture.outcome),
        "findings": [_finding_view(i + 1, f) for i, f in enumerate(findings)],
        "devices": _device_rows(capture),
        "step_chart": Markup(_step_chart(capture)) if capture.steps else None,
        "sampled_chart": (Markup(chart) if (chart := _sampled_chart(capture)) else None),
        "roles": _roles(capture),
        "storages": list(capture.top_storages),
        "env": sorted(capture.environment.items()),
        "is_doctor": capture.tool.endswith("doctor"),
        "failures": _failures(capture),
        "lines": _lines(capture),
        "holders": _holders(capture),
    }
    return str(_environment().get_template("report.html.j2").render(**context))


def write_html(capture: Capture, path: str | os.PathLike[str]) -> Path:
    """Write the report page of ``capture`` to ``path`` atomically and return the path.

    Raises:
        OSError: the file cannot be written (no partial file is left behind).
    """
    return Path(write_file(path, render_html(capture).encode("utf-8")))
