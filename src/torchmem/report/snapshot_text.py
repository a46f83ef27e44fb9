"""Render a :class:`~torchmem.model.snapshot.SnapshotReport` for the terminal (rich).

What ``torchmem report snapshot.pickle`` prints: per device, the peak and where it was
reached, the timeline as sparklines (allocated, reserved), the growth verdict, the
fragmentation verdict, what the cache handed back to the driver, the out-of-memory
events, and the allocations alive at the peak grouped by stack (the script's frames
first, then the library frame that allocated, then how many C++ frames); then the
findings with their evidence and fix, and the notes. Never imports torch.

Every string that comes from the snapshot (file names, function names, settings) is
escaped by :func:`torchmem.report.sanitize.printable` and reaches rich as ``Text``, never
as markup: a hostile snapshot cannot move the cursor or forge report lines.
"""

from __future__ import annotations

import sys
from typing import IO, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from torchmem.model.capture import Finding
from torchmem.model.readings import Fragmentation
from torchmem.model.snapshot import AllocationSite, DeviceSnapshot, Frame, SnapshotReport
from torchmem.report.sanitize import printable
from torchmem.report.terminal import sparkline
from torchmem.units import format_bytes

__all__ = ["render_snapshot", "snapshot_text", "where", "short_path"]

#: Allocation groups listed per device in the text report.
TEXT_SITES = 8


def short_path(filename: str) -> str:
    """A file name as the report shows it: from the package on for installed packages."""
    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path if len(path) <= 60 else "…/" + "/".join(path.split("/")[-2:])


def where(frame: Frame) -> str:
    """``file:line function`` of a frame, printable."""
    return printable(f"{short_path(frame.filename)}:{frame.line} {frame.name}", 300)


def _when(seconds: float | None, entry: int, entries: int) -> str:
    if not entry:
        return "at the start of the trace"
    at = f"entry {entry:,} of {entries:,}"
    return f"{seconds:.2f} s into the trace ({at})" if seconds is not None else at


def _headline(d: DeviceSnapshot) -> Text:
    text = Text(f"{printable(d.device)}: ", style="bold")
    if d.entries:
        text.append(f"peak {format_bytes(d.peak_allocated)} allocated", style="bold")
        text.append(f", {_when(d.peak_at_s, d.peak_entry, d.entries)}")
    else:
        text.append(f"{format_bytes(d.allocated_end)} allocated", style="bold")
        text.append(" (no trace was recorded)")
    return text


def _row(label: str, value: str, style: str = "") -> Text:
    line = Text(f"  {label:<12}", style="bold")
    line.append(value, style=style)
    return line


def _timeline(d: DeviceSnapshot, width: int) -> list[Text]:
    lines = []
    span = (f"over {d.duration_s:.1f} s" if d.timeline_unit == "s" and d.duration_s
            else f"over {d.entries:,} entries")
    for key in ("allocated", "reserved"):
        values = d.timeline.get(key, [])
        if len(values) < 2:
            continue
        line = _row(key, sparkline(values, width=max(10, min(48, width - 50))), "cyan")
        line.append(f"  {format_bytes(min(values))} .. {format_bytes(max(values))} {span}")
        lines.append(line)
    return lines


def _allocator(frag: Fragmentation) -> str:
    share = f"{frag.ratio:.0%} of the {format_bytes(frag.reserved)} reserved"
    if frag.verdict == "fragmented":
        return (f"fragmented: {format_bytes(frag.inactive_split)} in free pieces beside "
                f"blocks in use ({share}); empty_cache() cannot return them")
    if frag.verdict == "pressure":
        return (f"pressure: {frag.num_ooms} out-of-memory error(s), {frag.alloc_retries} "
                f"flush(es) to retry a cudaMalloc; {format_bytes(frag.inactive_split)} in "
                f"split free blocks ({share})")
    if frag.verdict == "cached":
        return (f"cached: {format_bytes(frag.releasable)} in wholly free segments, reused by "
                "the next allocations (not fragmentation)")
    return (f"ok: {format_bytes(frag.inactive_split)} in split free blocks ({share}), "
            f"{format_bytes(frag.releasable)} in wholly free segments")


def _status(d: DeviceSnapshot) -> list[Text]:
    out = [_row("at the end", f"{format_bytes(d.allocated_end)} allocated, "
                              f"{format_bytes(d.reserved_end)} reserved in {d.segments} "
                              "segments")]
    if d.growth is not None:
        style = {"growing": "bold red", "flat": "green"}.get(d.growth.verdict, "yellow")
        out.append(_row("growth", f"{d.growth.verdict}: {d.growth.reason}", style))
    if d.fragmentation is not None:
        style = "green" if d.fragmentation.verdict in ("ok", "cached") else "bold red"
        out.append(_row("allocator", _allocator(d.fragmentation), style))
    if d.flush_runs:
        out.append(_row("cache", f"{d.flush_runs} flush(es) handed "
                                 f"{format_bytes(d.bytes_returned)} back to the driver "
                                 f"({d.empty_cache_runs} by torch.cuda.empty_cache()); "
                                 f"{format_bytes(d.bytes_rerequested)} was requested again"))
    if d.ooms:
        last = d.oom_events[-1] if d.oom_events else None
        text = f"raised {d.ooms} time(s)"
        if last is not None:
            free = f" with {format_bytes(last.device_free)} free" \
                if last.device_free is not None else ""
            at = f" at {where(last.user_frames[0])}" if last.user_frames else ""
            text += f"; the last asked for {format_bytes(last.requested)}{free}{at}"
        out.append(_row("OOM", text, "bold red"))
    return out


def _site_rows(sites: Sequence[AllocationSite], table: Table) -> None:
    for s in sites:
        first = where(s.user_frames[0]) if s.user_frames else (
            where(s.library_frames[0]) if s.library_frames else "(no Python frames recorded)")
        detail = []
        if len(s.user_frames) > 1:
            detail.append("← " + " ← ".join(where(f) for f in s.user_frames[1:4]))
        via = f"via {where(s.library_frames[0])}" if s.user_frames and s.library_frames else ""
        if s.cpp_frames:
            via += f"{' ' if via else ''}(+{s.cpp_frames} C++ frames)"
        if via:
            detail.append(via)
        if s.before_trace:
            detail.append("allocated before the trace began")
        cell = Text(first, style="bold")
        for d in detail:
            cell.append("\n" + d, style="dim")
        table.add_row(format_bytes(s.bytes), f"{s.count:,}", cell)


def _sites(d: DeviceSnapshot) -> list[Text | Table]:
    if not d.top_at_peak:
        return []
    total = d.peak_allocated
    head = Text(f"\n  alive at the peak: {d.live_at_peak:,} allocations, "
                f"{format_bytes(total)}", style="bold")
    if d.unattributed:
        head.append(f" ({format_bytes(d.unattributed)} not accounted for by the trace)",
                    style="yellow")
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("bytes", justify="right")
    table.add_column("count", justify="right")
    table.add_column("allocated at (your code first)")
    _site_rows(d.top_at_peak[:TEXT_SITES], table)
    return [head, table]


def _finding_lines(index: int, f: Finding) -> list[tuple[str, str]]:
    lines = [(f"[{index}] {printable(f.title)}  ({format_bytes(f.bytes)} on "
              f"{printable(f.device)})", "bold red")]
    c = f.culprit
    if c is not None and c.file:
        lines.append((f"    culprit: `{printable(c.name)}` "
                      f"{printable(short_path(c.file))}:{c.line}", "bold"))
    lines.extend((f"    - {printable(e)}", "") for e in f.evidence)
    if f.fix:
        lines.append((f"    fix: {printable(f.fix)}", "green"))
    lines.append((f"    cause: {printable(f.cause)}, confidence {printable(f.confidence)}",
                  "dim"))
    return lines


def snapshot_text(report: SnapshotReport) -> list[str]:
    """The findings part of the report as plain text lines (for tests and tools)."""
    out: list[str] = []
    for i, f in enumerate(report.findings, 1):
        out.extend(text for text, _ in _finding_lines(i, f))
    return out


def render_snapshot(report: SnapshotReport, file: IO[str] | None = None,
                    width: int | None = None) -> None:
    """Print ``report`` for a person (default: on stdout)."""
    stream = file if file is not None else sys.stdout
    console = Console(file=stream, width=width or (None if stream.isatty() else 100),
                      highlight=False, soft_wrap=False)
    entries = sum(d.entries for d in report.devices)
    console.print()
    head = Text("torchmem report: ", style="bold")
    head.append(printable(report.source), style="bold cyan")
    console.print(head)
    n = len(report.devices)
    console.print(f"CUDA memory snapshot: {format_bytes(report.file_bytes)}, {entries:,} trace "
                  f"entries, {n} device{'s' if n != 1 else ''}")
    for d in report.devices:
        console.print()
        console.print(_headline(d))
        for line in _status(d)[:1] + _timeline(d, console.width) + _status(d)[1:]:
            console.print(line, soft_wrap=True)
        for part in _sites(d):
            console.print(part)
    console.print()
    if report.findings:
        console.print(Text("findings", style="bold"))
        for i, f in enumerate(report.findings, 1):
            for text, style in _finding_lines(i, f):
                console.print(Text(text, style=style), soft_wrap=True)
    else:
        console.print(Text("no findings: no fragmentation worth acting on and no cache "
                           "emptied again and again", style="green"))
    for note in report.notes:
        console.print(Text(f"note: {printable(note)}", style="dim"), soft_wrap=True)
