"""Render memory per source line (``torchmem lines``) for the terminal, and for the HTML page.

:func:`render_lines` prints, for a :class:`~torchmem.model.capture.Capture` with
``lines``: how they were measured (steps profiled, the peak), the top lines as a table
(the line that keeps a leak alive first, then bytes per step, alive at the step's end,
net change per step and share of the peak), the part no line explains, and the
allocation sites of the largest storages (where each was made, who keeps it).
:func:`annotated_source` groups the lines by file and reads each file's source around
them, for the HTML page's annotated source view (:mod:`torchmem.report.html`).

Every string of the capture is escaped by :mod:`torchmem.report.sanitize` first and
reaches rich as ``Text``. Never imports torch.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from torchmem.model.capture import Capture
from torchmem.model.lines import AllocationSite, LineProfile, LineRecord, StackFrame
from torchmem.report.sanitize import printable_capture
from torchmem.units import format_bytes, format_delta

__all__ = ["render_lines", "print_lines", "lines_summary", "site_text", "frame_text", "annotated_source",
           "lines_context", "WHEN_TEXT", "HTML_ROWS"]

#: Most lines the HTML table lists (the JSON capture keeps them all).
HTML_ROWS = 60

#: How each moment of an allocation site is introduced.
WHEN_TEXT = {
    "peak": "alive at the highest profiled peak",
    "census": "listed by the census at the step with the highest memory",
    "oom": "alive at the out-of-memory error",
}


def frame_text(frame: StackFrame) -> str:
    """``file.py:12 in fn``."""
    return f"{os.path.basename(frame.file) or frame.file}:{frame.line} in {frame.function}"


def site_text(site: AllocationSite, holder: bool = True) -> str:
    """One line describing a storage: bytes, dtype and shape, role, holder."""
    parts = [format_bytes(site.nbytes)]
    if site.dtype:
        parts.append(site.dtype)
    if site.shape is not None:
        parts.append("(" + ", ".join(str(d) for d in site.shape) + ")")
    if site.device != "cpu":
        parts.append(f"on {site.device}")
    if site.role:
        parts.append(site.role)
    text = " ".join(parts)
    if site.holder and holder:
        text += f", kept by {site.holder}"
    return text


def lines_summary(capture: Capture) -> str:
    """One sentence: steps profiled and the peak the shares refer to."""
    profile = capture.line_profile or LineProfile()
    steps = [w.step for w in profile.steady if w.device == "cpu"]
    shown = ", ".join(str(s) for s in steps[:12])
    if len(steps) > 12:
        shown += f", … ({len(steps) - 12} more)"
    head = f"{len(steps)} of {profile.steps} steps profiled exactly"
    if shown:
        head += f" ({shown})"
    if profile.peak_step is not None:
        head += f"; peak {format_bytes(profile.peak_bytes)} of tensors during {_window(profile)}"
    return head


def _window(profile: LineProfile) -> str:
    """The window of the peak, in words."""
    if profile.peak_kind == "setup":
        return "the setup"
    if profile.peak_kind == "end":
        return f"the end of the run (after step {profile.peak_step})"
    return f"step {profile.peak_step}"


def _table(rows: Sequence[LineRecord], top: int) -> Table:
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("line")
    table.add_column("alloc/step", justify="right")
    table.add_column("alive at end", justify="right")
    table.add_column("Δ/step", justify="right")
    table.add_column("peak share", justify="right")
    table.add_column("code")
    for row in rows[:top]:
        where = Text(row.where + (f" [{row.device}]" if row.device != "cpu" else ""))
        code = Text(row.code or "")
        if row.retains is not None:
            keeps = (f"keeps {format_bytes(row.retained_bytes)}/step alive"
                     if row.retained_bytes else "keeps memory alive")
            code = Text(f"{row.code}  ", style="bold") + Text(f"<- {keeps}: {row.retains}",
                                                              style="bold red")
        table.add_row(where, format_bytes(row.allocated_bytes), format_bytes(row.alive_bytes),
                      format_delta(row.delta_bytes), f"{100 * row.peak_share:.1f}%", code)
    return table


_OWNED = ("parameter", "buffer", "gradient", "optimizer_state")


def _shown_sites(sites: Sequence[AllocationSite], largest: int = 3,
                 unowned: int = 3) -> list[AllocationSite]:
    """The ``largest`` largest, then the largest ``unowned`` that no module or optimizer
    owns (where what a script keeps by mistake shows)."""
    first = list(sites[:largest])
    rest = [s for s in sites[largest:] if s.role not in _OWNED][:unowned]
    return first + rest


def _sites(console: Console, profile: LineProfile,
           moments: Sequence[str] = ("oom", "peak", "census")) -> None:
    for when in moments:
        sites = [s for s in profile.sites if s.when == when]
        if not sites:
            continue
        at = _window(profile) if when == "peak" else f"step {sites[0].step}"
        console.print()
        console.print(Text(f"largest storages {WHEN_TEXT[when]} ({at}): where made, who keeps it",
                           style="bold"))
        for site in _shown_sites(sites):
            console.print(Text(f"  {site_text(site)}"))
            made = site.made_in or "a step that was not profiled"
            if site.stack:
                user = [f for f in site.stack if f.user] or list(site.stack[:1])
                console.print(Text(f"    made in {made} at " + " <- ".join(
                    frame_text(f) for f in user[:4]), style="dim"))
            else:
                console.print(Text(f"    made in {made}", style="dim"))


def render_lines(capture: Capture, file: IO[str] | None = None, *, top: int = 15,
                 width: int | None = None) -> None:
    """Print the per-line table and the allocation sites of ``capture``.

    Args:
        capture: a capture with ``lines`` (``torchmem lines --json``).
        file: where to write (default: stderr).
        top: most lines shown.
        width: console width (default: the terminal's, or 120 when not a terminal).
    """
    stream = file if file is not None else sys.stderr
    capture = printable_capture(capture)
    console = Console(file=stream, width=width or (None if stream.isatty() else 120),
                      highlight=False, soft_wrap=False)
    console.print()
    print_lines(capture, console, top=top)


def print_lines(capture: Capture, console: Console, *, top: int = 15,
                moments: Sequence[str] = ("oom", "peak", "census")) -> None:
    """Print the per-line section of an already escaped ``capture`` on ``console``
    (:func:`render_lines`; :mod:`torchmem.report.terminal` adds it to a capture's report);
    ``moments``: which allocation sites to list."""
    profile = capture.line_profile or LineProfile()
    script = capture.argv[0] if capture.argv else "?"
    head = Text("torchmem lines: ", style="bold")
    head.append(script, style="bold cyan")
    head.append(f": {lines_summary(capture)}")
    console.print(head)
    rows = list(capture.lines)
    if not rows:
        console.print(Text("no tensor memory was allocated on a line of the script's code",
                           style="dim"))
    else:
        console.print()
        console.print(_table(rows, top))
        hidden = len(rows) - top
        if hidden > 0:
            console.print(Text(f"({hidden} more lines in --json/--html)", style="dim"))
    if any(w.paired for w in profile.steady):
        console.print(Text(
            f"not attributed to a line: {format_delta(profile.unattributed_bytes)}/step "
            "(frees of tensors made before profiling or in steps that were not profiled)",
            style="dim"))
    _sites(console, profile, moments)
    for note in profile.notes:
        console.print(Text(f"note: {note}", style="dim"))


def annotated_source(rows: Sequence[LineRecord], context: int = 2,
                     max_files: int = 8) -> list[dict[str, Any]]:
    """The files of ``rows`` with their measured lines and ``context`` lines around each.

    Returns:
        One dict per file (most bytes first): ``file``, ``lines`` as a list of
        ``{"n": number, "code": text, "row": LineRecord | None}`` with ``None`` entries
        marking a gap. The context comes from the file only when it still holds the
        measured code on the measured lines (a capture is data from anywhere: it never
        makes the page quote a file it does not already quote); otherwise the view
        shows the measured lines alone.
    """
    by_file: dict[str, list[LineRecord]] = {}
    for row in rows:
        if row.line > 0:
            by_file.setdefault(row.file, []).append(row)
    order = sorted(by_file, key=lambda f: -sum(r.allocated_bytes + r.retained_bytes
                                               + r.peak_bytes for r in by_file[f]))
    out = []
    for file in order[:max_files]:
        marked = {r.line: r for r in by_file[file]}
        source = _source(file, marked)
        wanted: set[int] = set()
        for n in marked:
            wanted.update(range(max(n - context, 1), n + context + 1))
        lines: list[dict[str, Any] | None] = []
        previous = 0
        for n in sorted(wanted):
            if source and n > len(source):
                continue
            if not source and n not in marked:
                continue
            if previous and n > previous + 1:
                lines.append(None)
            code = source[n - 1] if source else (marked[n].code or "")
            lines.append({"n": n, "code": code.rstrip(), "row": marked.get(n)})
            previous = n
        out.append({"file": file, "lines": lines})
    return out


def _source(file: str, marked: dict[int, LineRecord]) -> list[str]:
    """The lines of ``file`` if every measured line with code matches it, else []."""
    try:
        if not os.path.isfile(file) or os.path.getsize(file) > 5 * 1024 * 1024:
            return []
        with open(file, encoding="utf-8", errors="replace") as fh:
            source = fh.read().splitlines()
    except (OSError, ValueError):
        return []
    checked = 0
    for n, row in marked.items():
        if not row.code:
            continue
        if n > len(source) or source[n - 1].strip() != row.code.strip():
            return []
        checked += 1
    return source if checked else []


def lines_context(capture: Capture,
                  moments: Sequence[str] = ("oom", "peak", "census")) -> dict[str, object]:
    """The values the HTML page's per-line section (``_lines.html.j2``) renders.

    Strings stay raw here: the template escapes them (jinja2 autoescaping).
    """
    profile = capture.line_profile or LineProfile()
    rows = list(capture.lines)
    groups = []
    for when in moments:
        sites = [s for s in profile.sites if s.when == when]
        if not sites:
            continue
        at = _window(profile) if when == "peak" else f"step {sites[0].step}"
        groups.append({
            "title": f"{WHEN_TEXT[when]} ({at})",
            "sites": [{"site": s, "text": site_text(s, holder=False),
                       "frames": [{"text": frame_text(f), "file": f.file, "user": f.user}
                                  for f in s.stack[:12]]} for s in sites],
        })
    paired = any(w.paired for w in profile.steady)
    return {
        "summary": lines_summary(capture),
        "rows": rows[:HTML_ROWS],
        "hidden": max(len(rows) - HTML_ROWS, 0),
        "unattributed": profile.unattributed_bytes if paired else None,
        "sites": groups,
        "sources": annotated_source(rows[:HTML_ROWS]),
    }
