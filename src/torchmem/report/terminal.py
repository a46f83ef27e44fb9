"""Render a :class:`~torchmem.model.capture.Capture` for the terminal (rich).

The same renderer serves ``torchmem run``, ``torchmem doctor`` and ``torchmem report
--text``: a headline, the peak per device, a per-step table (first and last steps and
the growth per step), a sparkline of the timeline, and the doctor's findings when the
capture has them. Never imports torch.

Every string of the capture is escaped by :mod:`torchmem.report.sanitize` before it is
printed (a capture is a file anyone may hand you), and reaches rich as a ``Text``, never
as markup, so no capture string can move the cursor, write a link or the clipboard.
Very large captures are shown in part: at most :data:`MAX_DEVICES` devices.
"""

from __future__ import annotations

import importlib
import math
import sys
from typing import IO, Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from torchmem.analyze.growth import bytes_per_step
from torchmem.model.capture import Capture, StepRecord
from torchmem.report.sanitize import printable_capture
from torchmem.units import format_bytes, format_delta

__all__ = ["render_capture", "sparkline", "step_slope", "MAX_DEVICES"]

#: Most devices the text report lists (a capture may name up to 1024).
MAX_DEVICES = 16

_BARS = "▁▂▃▄▅▆▇█"
_SOURCE_TEXT = {
    "optimizer": "optimizer.step() calls",
    "backward": "backward() calls",
    "forward": "top-level model forward calls",
    "none": "no steps found",
}


def sparkline(values: Sequence[float], width: int = 60) -> str:
    """A one-line bar chart of ``values``, bucketed to ``width`` characters (max per bucket)."""
    values = [float(v) for v in values if math.isfinite(v)]
    if not values:
        return ""
    width = max(1, width)
    if len(values) > width:
        size = len(values) / width
        values = [max(values[int(i * size):max(int((i + 1) * size), int(i * size) + 1)])
                  for i in range(width)]
    low, high = min(values), max(values)
    if high - low <= 0:
        return _BARS[0] * len(values)
    scale = (len(_BARS) - 1) / (high - low)
    return "".join(_BARS[int(round((v - low) * scale))] for v in values)


def step_slope(steps: Sequence[StepRecord], device: str, skip: float = 0.2) -> float | None:
    """Least-squares bytes per step on ``device``, skipping the first ``skip`` fraction."""
    points = [(float(s.step), float(s.used[device])) for s in steps if device in s.used]
    points = points[int(len(points) * skip):]
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0 or not math.isfinite(sxx):
        return None
    slope = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx
    return slope if math.isfinite(slope) else None


def _step_count(capture: Capture) -> int:
    """Steps the run had (long runs keep a thinned record: the last one's number)."""
    return max(capture.steps[-1].step, len(capture.steps)) if capture.steps else 0


def _exit_text(capture: Capture) -> str:
    """``sys.exit(3)``, or ``sys.exit`` with a message (Python printed it and exits 1;
    the message is not repeated here, the capture's ``error`` holds it)."""
    if (capture.error or "").startswith("SystemExit: "):
        return f"the script called sys.exit with a message: exit code {capture.exit_code}"
    return f"the script called sys.exit({capture.exit_code})"


def _headline(capture: Capture) -> Text:
    script = capture.argv[0] if capture.argv else "?"
    n = _step_count(capture)
    source = _SOURCE_TEXT.get(capture.step_source, capture.step_source)
    text = Text()
    text.append(f"{capture.tool}: ", style="bold")
    text.append(script, style="bold cyan")
    steps = f"{n} steps ({source})" if n else source
    text.append(f": {steps}, {capture.duration_s:.1f} s, exit code {capture.exit_code}")
    return text


def _outcome_line(capture: Capture) -> Text | None:
    kind = capture.outcome
    if kind == "ok":
        return None
    messages = {
        "max_steps": f"stopped cleanly after {_step_count(capture)} steps (--steps)",
        "exit": _exit_text(capture),
        "interrupt": "the script was interrupted (Ctrl-C); the report covers what ran",
        "terminated": "the script was stopped by SIGTERM; the report covers what ran",
        "oom": f"the script ran out of memory: {capture.error}",
        "exception": f"the script raised {capture.error}; the report covers what ran",
    }
    style = "yellow" if kind in ("max_steps", "exit") else "bold red"
    return Text(messages.get(kind, kind), style=style)


def _device_table(capture: Capture) -> Table:
    table = Table(title=None, show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("device")
    table.add_column("peak", justify="right")
    table.add_column("at first step", justify="right")
    table.add_column("at last step", justify="right")
    table.add_column("growth/step", justify="right")
    measure = {"cpu": "C heap in use"}
    for device in capture.devices[:MAX_DEVICES]:
        first = next((s.used[device] for s in capture.steps if device in s.used), None)
        last = next((s.used[device] for s in reversed(capture.steps) if device in s.used), None)
        # the verdict's own number (analyze.growth), never a second estimate
        slope = bytes_per_step(capture.steps, device, capture.growth)
        name = device + (f" ({measure[device]})" if device in measure else " (allocated)")
        table.add_row(
            Text(name),
            format_bytes(capture.peak[device]) if device in capture.peak else "n/a",
            format_bytes(first) if first is not None else "n/a",
            format_bytes(last) if last is not None else "n/a",
            format_delta(slope) if slope is not None else "n/a",
        )
    return table


def _steps_table(capture: Capture, edge: int = 3) -> Table | None:
    steps = list(capture.steps)
    if not steps:
        return None
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("step", justify="right")
    table.add_column("time", justify="right")
    devices = [d for d in capture.devices[:MAX_DEVICES] if any(d in s.used for s in steps)]
    for device in devices:
        table.add_column(Text(device), justify="right")
        table.add_column("Δ", justify="right")
    shown: list[StepRecord | None] = (
        list(steps) if len(steps) <= 2 * edge + 1 else [*steps[:edge], None, *steps[-edge:]]
    )
    previous: dict[int, StepRecord] = {s.step: steps[i - 1] for i, s in enumerate(steps) if i}
    for record in shown:
        if record is None:
            table.add_row("…", "", *([""] * (2 * len(devices))))
            continue
        cells = [str(record.step), f"{record.time:.2f}s"]
        before = previous.get(record.step)
        for device in devices:
            value = record.used.get(device)
            cells.append(format_bytes(value) if value is not None else "")
            if before is not None and value is not None and device in before.used:
                cells.append(format_delta(value - before.used[device]))
            else:
                cells.append("")
        table.add_row(*cells)
    return table


def _timeline_lines(capture: Capture) -> list[Text]:
    lines: list[Text] = []
    series = {k: v for k, v in capture.timeline.items() if k not in ("t", "step")}
    if not series:
        series = {d: [float(s.used[d]) for s in capture.steps if d in s.used]
                  for d in capture.devices[:MAX_DEVICES]}
        label = "per step"
    else:
        label = "sampled"
    for device, values in list(series.items())[:MAX_DEVICES]:
        values = [v for v in values if math.isfinite(v)]
        if len(values) < 2:
            continue
        line = Text(f"  {device:<8} ", style="bold")
        line.append(sparkline(values), style="cyan")
        line.append(f"  {format_bytes(min(values))} .. {format_bytes(max(values))} ({label})")
        lines.append(line)
    return lines


def render_capture(capture: Capture, file: IO[str] | None = None, width: int | None = None) -> None:
    """Print ``capture`` for a person.

    Args:
        capture: what a run recorded.
        file: where to write (default: stderr, which keeps the script's stdout clean).
        width: console width (default: the terminal's, or 100 when not a terminal).
    """
    stream = file if file is not None else sys.stderr
    capture = printable_capture(capture)
    console = Console(file=stream, width=width or (None if stream.isatty() else 100),
                      highlight=False, soft_wrap=False)
    console.print()
    console.print(_headline(capture))
    outcome = _outcome_line(capture)
    if outcome is not None:
        console.print(outcome)
    if capture.devices:
        console.print()
        console.print(_device_table(capture))
        hidden = len(capture.devices) - MAX_DEVICES
        if hidden > 0:
            console.print(Text(f"({hidden} more devices not shown; see the HTML report)",
                               style="dim"))
    table = _steps_table(capture)
    if table is not None:
        console.print()
        console.print(table)
    lines = _timeline_lines(capture)
    if lines:
        console.print()
        console.print(Text("memory timeline", style="bold"))
        for line in lines:
            console.print(line)
    if capture.tool.endswith("doctor"):
        try:
            findings: Any = importlib.import_module("torchmem.report.findings")
        except ImportError:
            findings = None
        if findings is not None:
            console.print()
            findings.render_findings(capture, console)
    if capture.lines or capture.line_profile is not None:  # torchmem lines, doctor --lines
        from torchmem.report.lines import print_lines

        console.print()
        # with the doctor's holders section, its census and OOM storages are listed there
        print_lines(capture, console, top=10 if capture.holders else 15,
                    moments=("peak",) if capture.holders else ("oom", "peak", "census"))
    if capture.holders:
        from torchmem.report.holders import print_holders

        print_holders(capture, console)
    for note in capture.notes:
        console.print(Text(f"note: {note}", style="dim"))
