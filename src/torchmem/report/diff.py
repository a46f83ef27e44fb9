"""Render a :class:`~torchmem.analyze.diff.CaptureDiff` for the terminal (rich; no torch).

``torchmem diff a.json b.json`` prints: the two inputs, then side by side the peak and
the growth per step of each device, the steps and the time per step, the bytes by role,
by module and by source line (the rows that changed most), the findings that appeared,
vanished or changed, and what explains the difference. Every string that comes from an
input (labels, names, code, explanations quoting them) is escaped by
:func:`torchmem.report.sanitize.printable` and reaches rich as ``Text``, never markup.
"""

from __future__ import annotations

import sys
from typing import IO, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from torchmem.analyze.diff import CaptureDiff, LineRow, Row
from torchmem.report.sanitize import printable
from torchmem.units import format_bytes, format_delta

__all__ = ["render_diff", "MAX_TABLE_ROWS", "change_text", "figure_text", "line_cell_text", "headline_rows"]

#: rows shown in the module and line tables
MAX_TABLE_ROWS = 10


def figure_text(value: float | None, unit: str = "") -> str:
    """A figure of one side: bytes, or a signed change per ``unit`` (``n/a`` when absent)."""
    if value is None:
        return "n/a"
    return (format_delta(value) + f"/{unit}") if unit else format_bytes(value)


def change_text(row: Row, unit: str = "") -> str:
    """The change of a row: signed bytes (per ``unit``), with the relative change of a size."""
    if row.a is None or row.b is None:
        return "only in " + ("b" if row.a is None else "a")
    text = format_delta(row.change) + (f"/{unit}" if unit else "")
    if row.a and row.a > 0 and not unit:
        text += f" ({row.change / row.a:+.1%})"
    return text


def line_cell_text(made: int | None, alive: int | None, peak: bool) -> str:
    """A line's figure of one side: alive at the peak, or allocated / alive at step end."""
    if made is None and alive is None:
        return "—"
    if peak:
        return format_bytes(alive or 0)
    return f"{format_bytes(made or 0)} / {format_bytes(alive or 0)}"


def _head(label: str, most: int = 24) -> str:
    """A column heading for an input: its label, or its end when long (the full labels
    are on the report's first lines)."""
    text = printable(label, 400)
    return text if len(text) <= most else "…" + text[-(most - 1):]


def _table(diff: CaptureDiff, first: str) -> Table:
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column(first)
    table.add_column(Text(_head(diff.a.label)), justify="right")
    table.add_column(Text(_head(diff.b.label)), justify="right")
    table.add_column("change", justify="right")
    return table


def headline_rows(diff: CaptureDiff) -> list[tuple[str, str, str, str, bool]]:
    """The first table's rows: ``(what, a, b, change, secondary)`` for the peak, reserved
    peak and growth of each device, the steps and the time per step (``secondary``: a
    detail row, such as the fitted slope under a growth verdict)."""
    rows = [(f"peak {r.key}", figure_text(r.a), figure_text(r.b), change_text(r), False)
            for r in diff.peak]
    rows += [(f"peak reserved {r.key}", figure_text(r.a), figure_text(r.b), change_text(r),
              False) for r in diff.reserved]
    unit = diff.a.growth_unit
    for row in diff.growth:
        verdicts = f"{diff.a.verdict.get(row.key, '?')} -> {diff.b.verdict.get(row.key, '?')}"
        sa, sb = diff.a.slope.get(row.key), diff.b.slope.get(row.key)
        rows.append((f"growth/{unit} {row.key}", figure_text(row.a, unit),
                     figure_text(row.b, unit), f"{change_text(row, unit)}  ({verdicts})", False))
        if (sa or sb) and (sa != row.a or sb != row.b):
            rows.append(("  fitted slope", figure_text(sa, unit), figure_text(sb, unit), "", True))
    if diff.steps is not None and (diff.steps.a or diff.steps.b):
        rows.append(("steps", str(int(diff.steps.a or 0)), str(int(diff.steps.b or 0)), "",
                     False))
    st = diff.step_time
    if st is not None and (st.a is not None or st.b is not None):
        rows.append(("time/step", f"{st.a * 1e3:.1f} ms" if st.a is not None else "n/a",
                     f"{st.b * 1e3:.1f} ms" if st.b is not None else "n/a",
                     f"×{st.b / st.a:.2f}" if st.a and st.b else "", False))
    return rows


def _headline_table(diff: CaptureDiff) -> Table:
    table = _table(diff, "")
    for what, a, b, change, secondary in headline_rows(diff):
        style = "dim" if secondary else ""
        table.add_row(Text(printable(what, 60), style=style), Text(a, style=style),
                      Text(b, style=style), Text(change))
    return table


def _rows_table(diff: CaptureDiff, title: str, rows: Sequence[Row]) -> Table:
    table = _table(diff, title)
    for row in rows:
        table.add_row(Text("  " + printable(row.key, 60)), figure_text(row.a), figure_text(row.b),
                      change_text(row))
    return table


def _lines_table(diff: CaptureDiff, rows: Sequence[LineRow], width: int) -> Table:
    peak = diff.a.line_measure == "peak"
    cells = [("  " + printable(row.where, 60), printable(row.code.strip(), 80),
              line_cell_text(row.allocated_a, row.alive_a, peak),
              line_cell_text(row.allocated_b, row.alive_b, peak),
              format_delta(row.change)) for row in rows]
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    heads = ["by line", "alive at the peak" if peak else "allocated / alive at step end",
             _head(diff.a.label), _head(diff.b.label), "change"]
    widest = [max([len(c[i]) for c in cells] + [len(h)]) for i, h in enumerate(heads)]
    # the code gets what the other columns leave (2 spaces between columns)
    room = width - sum(widest) + widest[1] - 2 * (len(heads) - 1)
    code = max(8, min(40, widest[1], room))
    for i, head in enumerate(heads):
        if i == 1:
            table.add_column(head, no_wrap=True, overflow="ellipsis", width=code,
                             style="dim")
        else:
            table.add_column(Text(head), no_wrap=True, min_width=widest[i],
                             justify="left" if i == 0 else "right")
    for c in cells:
        table.add_row(Text(c[0]), Text(c[1]), c[2], c[3], c[4])
    return table


def _inputs(diff: CaptureDiff) -> list[Text]:
    lines = []
    for name, side in (("a", diff.a), ("b", diff.b)):
        text = Text(f"  {name}: ", style="bold")
        text.append(printable(side.label, 200), style="cyan")
        what = [side.tool or side.kind]
        if side.command:
            what.append(printable(side.command, 200))
        text.append("  " + ", ".join(what))
        lines.append(text)
    return lines


def render_diff(diff: CaptureDiff, file: IO[str] | None = None, width: int | None = None,
                limits_text: Sequence[str] = ()) -> None:
    """Print ``diff`` for a person.

    Args:
        diff: what :func:`torchmem.analyze.diff.diff_captures` returned.
        file: where to write (default: stdout).
        width: console width (default: the terminal's, or 100 when not a terminal).
        limits_text: the ``--fail-over`` lines the diff exceeded (printed last).
    """
    stream = file if file is not None else sys.stdout
    tty = getattr(stream, "isatty", lambda: False)()
    console = Console(file=stream, width=width or (None if tty else 100), highlight=False,
                      soft_wrap=False)
    head = Text("torchmem diff: ", style="bold")
    head.append(printable(diff.a.label, 200), style="bold cyan")
    head.append(" -> ")
    head.append(printable(diff.b.label, 200), style="bold cyan")
    console.print(head, soft_wrap=True)
    for line in _inputs(diff):
        console.print(line, soft_wrap=True)
    console.print()
    console.print(_headline_table(diff))
    roles = [r for r in diff.roles if r.a or r.b]
    if roles:
        console.print()
        console.print(_rows_table(diff, "bytes by role (census)", roles))
    changed = [r for r in diff.modules if r.change][:MAX_TABLE_ROWS]
    if changed:
        source = diff.b.module_source or diff.a.module_source
        title = "bytes by module" + (f" (from {source})" if source and source != "capture" else "")
        console.print()
        console.print(_rows_table(diff, title, changed))
    elif diff.modules:
        console.print()
        console.print(Text(f"bytes by module: no change ({len(diff.modules)} modules)",
                           style="dim"))
    lines = [r for r in diff.lines if r.change][:MAX_TABLE_ROWS]
    if lines:
        console.print()
        console.print(_lines_table(diff, lines, console.width))
    if diff.findings:
        console.print()
        console.print(Text("findings", style="bold"))
        for c in diff.findings:
            style = {"new": "bold red", "gone": "green", "changed": "yellow"}[c.status]
            text = Text(f"  {c.status:<8}", style=style)
            text.append(printable(c.title, 80))
            if c.holder:
                text.append(f"  `{printable(c.holder, 80)}`", style="bold")
            if c.where:
                text.append(f" {printable(c.where, 80)}")
            size = " -> ".join(format_bytes(x) for x in (c.bytes_a, c.bytes_b) if x is not None)
            text.append(f"  {size}")
            console.print(text)
    console.print()
    console.print(Text("what explains the difference", style="bold"))
    if diff.explanations:
        for e in diff.explanations:
            console.print(Text(f"  - {printable(e.text, 1000)}"), soft_wrap=True)
    else:
        console.print(Text("  nothing to explain: peaks, growth, bytes by role, modules, lines "
                           "and findings are the same within noise (2 % or 256 KiB)"),
                      soft_wrap=True)
    for note in diff.notes:
        console.print(Text(f"note: {printable(note, 1000)}", style="dim"), soft_wrap=True)
    for limit in limits_text:
        console.print(Text(printable(limit, 1000), style="bold red"), soft_wrap=True)
