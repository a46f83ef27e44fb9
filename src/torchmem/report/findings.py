"""Render the doctor's verdict and findings for the terminal (rich; no torch).

``render_findings(capture, console)`` prints the headline (does memory grow, by how much
per step, over which steps, how good the fit is, on which device), then each finding
ranked by bytes: its cause, the culprit as the user wrote it with ``file:line`` and the
code, the evidence, and the fix. When nothing is wrong it says so, with the figures.
:func:`findings_text` returns the same as plain text lines (for tests and tools).
Every string from the capture is escaped first (:mod:`torchmem.report.sanitize`), so
neither can pass a terminal escape sequence or a forged line from the capture.
"""

from __future__ import annotations

import os
from typing import Sequence

from rich.console import Console
from rich.text import Text

from torchmem.model.capture import Capture, Finding, Growth
from torchmem.report.sanitize import printable_capture
from torchmem.units import format_bytes

__all__ = ["render_findings", "findings_text", "headline", "phase_lines", "analysis_failures"]


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
        if g.stretches:
            return (f"memory grows by {format_bytes(g.bytes_per_step)} per step within each of "
                    f"{g.stretches} stretches and falls back after each (steps "
                    f"{g.first_step}-{g.last_step}, a sawtooth) on {g.device}")
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


#: how notes about a failed analysis start (the doctor's probe and the runner write them)
_FAILURE_NOTES = ("analysis incomplete:", "probe error:")


def phase_lines(capture: Capture) -> list[str]:
    """One line per kind of evaluation pass: how many, and its own growth verdict."""
    out = []
    for p in capture.phases:
        if not p.kind.startswith("eval"):
            continue
        mode = "grad enabled" if p.kind == "eval-grad" else "no_grad"
        g = p.growth
        verdict = ""
        if g is not None:
            verdict = {"growing": f": memory {g.reason}",
                       "undecided": f": growth within passes undecided, {g.reason}"}.get(
                g.verdict, f": {g.reason}" if g.reason else "")
        out.append(f"evaluation passes ({mode}): {p.passes} pass{'es' if p.passes != 1 else ''}, "
                   f"{p.steps} top-level module calls, between training steps {p.first_step} and "
                   f"{p.last_step}{verdict}")
    return out


def analysis_failures(capture: Capture) -> list[str]:
    """The notes saying a part of the doctor's analysis failed (empty when it all ran)."""
    return [n.split(":", 1)[1].strip() for n in capture.notes if n.startswith(_FAILURE_NOTES)]


def fix_label(f: Finding) -> str:
    """``fix`` for an edit (or a capture written before fixes were edits), ``advice`` when
    no edit was valid for what the culprit holds or the edit was withdrawn."""
    return "advice" if f.fix_kind == "advice" else "fix"


def verification_text(f: Finding) -> str | None:
    """One line saying what re-running the script with the fix applied showed, built from
    the recorded numbers (the growth is the growth verdict's number, formatted as the
    headline formats it); None when the fix was not verified at all."""
    v = f.verification
    if v is None:
        return None
    def rate(x: float | None) -> str:
        return "?" if x is None else f"{format_bytes(x)}/step"
    cost = f" [re-run: {v.seconds:.1f} s]" if v.seconds else ""
    tried = "".join(f"; tried first: {t}" for t in v.tried)
    if v.status == "verified":
        left = v.reason[v.reason.find("; `"):] if "; `" in v.reason else ""  # what still grows
        return (f"verified: growth fell from {rate(v.bytes_per_step_before)} to "
                f"{rate(v.bytes_per_step_after)}, the edited script ran to the end "
                f"({v.steps_after} steps) with the same exit code ({v.exit_code_after})"
                f"{left}{tried}{cost}")
    if v.status == "crashed":
        return f"fix withdrawn: {v.reason}{tried}{cost}"
    return f"{v.status}: {v.reason}{tried}{cost}"


def _finding_lines(index: int, f: Finding, steps: int) -> list[tuple[str, str]]:
    """(text, style) lines of one finding."""
    end = f.data.get("end_step") if isinstance(f.data, dict) else None
    if isinstance(end, (int, float)) and not isinstance(end, bool) and 0 < end < 2**63:
        steps = int(end)
    size = []
    unit = f.data.get("step_unit") if isinstance(f.data, dict) else None
    if isinstance(unit, str) and unit:  # measured within evaluation passes, not per step
        if f.bytes_per_step:
            size.append(f"{format_bytes(f.bytes_per_step)} per {unit}")
        if f.bytes:
            size.append(f"{format_bytes(f.bytes)} held at the end of an evaluation pass")
        steps = 0
    approx = "~" if isinstance(f.data, dict) and f.data.get("bytes_measure") == "python_estimate" \
        else ""  # sizes of Python objects by estimate (torchmem.doctor.item_sizes)
    if f.bytes_per_step and not size:
        size.append(f"{approx}{format_bytes(f.bytes_per_step)}/step")
    if f.bytes and not unit:
        size.append(f"{approx}{format_bytes(f.bytes)} held" + (f" at step {steps}" if steps else ""))
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
        lines.append((f"    {fix_label(f)}: {f.fix}", "green"))
    checked = verification_text(f)
    if checked:
        ok = f.verification is not None and f.verification.status == "verified"
        lines.append((f"    {checked}", "green" if ok else "yellow"))
    lines.append((f"    cause: {f.cause}, confidence {f.confidence}", "dim"))
    return lines


def findings_text(capture: Capture) -> list[str]:
    """The doctor's verdict and findings as plain text lines."""
    capture = printable_capture(capture)
    out = [f"torchmem doctor: {headline(capture)}", *phase_lines(capture)]
    steps = len(capture.steps)
    failed = analysis_failures(capture)
    if not capture.findings and failed:
        out.append(f"no verdict: the analysis was incomplete ({failed[0]}); nothing was found "
                   "in what could be analysed, which is not a clean bill of health")
    elif not capture.findings:
        out.append("no findings: no variable of the script accumulates tensors, autograd "
                   "graphs or hooks across steps, no cyclic garbage holds tensors that "
                   "matter, and gradients are cleared between optimizer steps")
    for i, f in enumerate(capture.findings, 1):
        out.append("")
        out.extend(text for text, _ in _finding_lines(i, f, steps))
    return out


def render_findings(capture: Capture, console: Console) -> None:
    """Print the doctor's headline and findings on ``console``."""
    capture = printable_capture(capture)
    steps = len(capture.steps)
    line = Text("torchmem doctor: ", style="bold")
    growing = any(g.verdict == "growing" for g in capture.growth)
    line.append(headline(capture), style="bold red" if growing else "bold green")
    console.print(line)
    phases = phase_lines(capture)
    for text in phases:
        console.print(Text(text), soft_wrap=True)
    if not capture.findings:
        failed = bool(analysis_failures(capture))
        console.print(Text(findings_text(capture)[1 + len(phases)],
                           style="bold yellow" if failed else "green"))
        return
    for i, f in enumerate(capture.findings, 1):
        console.print()
        for text, style in _finding_lines(i, f, steps):
            console.print(Text(text, style=style), soft_wrap=True)
