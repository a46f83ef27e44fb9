"""Render the doctor's verdict and findings for the terminal (rich; no torch).

``render_findings(capture, console)`` prints the headline (does memory grow, by how much
per step, over which steps, how good the fit is, on which device), then each finding
ranked by bytes: its cause, the culprit as the user wrote it with ``file:line`` and the
code, the evidence, and the fix. When nothing is wrong it says so, with the figures.
:func:`findings_text` returns the same as plain text lines (for tests and tools).
"""

from __future__ import annotations

import os
from typing import Sequence

from rich.console import Console
from rich.text import Text

from torchmem.model.capture import Capture, Finding, Growth
from torchmem.units import format_bytes

__all__ = ["render_findings", "findings_text", "headline"]


def _where(file: str | None, line: int | None) -> str | None:
    if not file:
        return None
    try:
        shown = os.path.relpath(file)
    except ValueError:
        shown = file
    if shown.startswith(".." + os.sep + ".."):
        shown = file
    return f"{shown}:{line}" if line else shown


def headline(capture: Capture) -> str:
    """One sentence: the growth verdict of the device that matters most."""
    growth: Sequence[Growth] = capture.growth
    growing = [g for g in growth if g.verdict == "growing"]
    if growing:
        g = max(growing, key=lambda g: g.bytes_per_step)
        return (f"memory grows by {format_bytes(g.bytes_per_step)} per step (steps "
                f"{g.first_step}-{g.last_step}, R^2 {g.r2:.2f}) on {g.device}")
    undecided = [g for g in growth if g.verdict == "undecided"]
    if undecided:
        g = undecided[0]
        return f"could not decide whether memory grows on {g.device}: {g.reason}"
    if growth:
        g = growth[0]
        return f"no steady memory growth on {g.device}: {g.reason}"
    return "no steps were found, so growth per step could not be measured"


def _finding_lines(index: int, f: Finding, steps: int) -> list[tuple[str, str]]:
    """(text, style) lines of one finding."""
    end = f.data.get("end_step") if isinstance(f.data, dict) else None
    if end:
        steps = int(end)
    size = []
    if f.bytes_per_step:
        size.append(f"{format_bytes(f.bytes_per_step)}/step")
    if f.bytes:
        size.append(f"{format_bytes(f.bytes)} held" + (f" at step {steps}" if steps else ""))
    head = f"[{index}] {f.title}" + (f"  ({', '.join(size)})" if size else "")
    lines = [(head, "bold red" if f.bytes_per_step else "bold yellow")]
    c = f.culprit
    if c is not None:
        where = _where(c.file, c.line)
        parts = [c.type] if c.type else []
        if where:
            parts.append(where + (f" `{c.code}`" if c.code else ""))
        detail = f" ({', '.join(parts)})" if parts else ""
        lines.append((f"    culprit: `{c.name}`{detail}", "bold"))
    for sentence in f.evidence:
        lines.append((f"    - {sentence}", ""))
    if f.fix:
        lines.append((f"    fix: {f.fix}", "green"))
    lines.append((f"    cause: {f.cause}, confidence {f.confidence}", "dim"))
    return lines


def findings_text(capture: Capture) -> list[str]:
    """The doctor's verdict and findings as plain text lines."""
    out = [f"torchmem doctor: {headline(capture)}"]
    steps = len(capture.steps)
    if not capture.findings:
        out.append("no findings: no variable of the script accumulates tensors, autograd "
                   "graphs or hooks across steps, no cyclic garbage holds tensors, and "
                   "gradients are cleared between optimizer steps")
    for i, f in enumerate(capture.findings, 1):
        out.append("")
        out.extend(text for text, _ in _finding_lines(i, f, steps))
    return out


def render_findings(capture: Capture, console: Console) -> None:
    """Print the doctor's headline and findings on ``console``."""
    steps = len(capture.steps)
    line = Text("torchmem doctor: ", style="bold")
    growing = any(g.verdict == "growing" for g in capture.growth)
    line.append(headline(capture), style="bold red" if growing else "bold green")
    console.print(line)
    if not capture.findings:
        console.print(Text(findings_text(capture)[1], style="green"))
        return
    for i, f in enumerate(capture.findings, 1):
        console.print()
        for text, style in _finding_lines(i, f, steps):
            console.print(Text(text, style=style), soft_wrap=True)
