"""``torchmem.profile_lines(fn, *args)``: memory per line of a function, call by call.

Calls ``fn(*args, **kwargs)`` ``steps`` times, each call one exact window of the line
recorder (:mod:`torchmem.collect.lines`), and returns a :class:`LinesReport`: per line of
the user's code (library code with ``all_files=True``), the bytes allocated per call,
alive at the call's end, the net change per call and the share of the highest peak; the
allocation sites of the largest storages alive at that peak. When storages made in a
call outlive the following calls (memory that grows call after call), the variable that
keeps them is found from the caller's frame and ``fn``'s globals (the doctor's walk) and
the statement that keeps adding to it ranks first (the doctor's source search).

Cost: every call runs under the storage engine's dispatch mode (see
``benchmarks/lines.py``); the analysis of kept storages runs once, after the calls.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any, Callable

from torchmem.analyze.line_windows import rank_rows
from torchmem.collect.lines import LineRecorder
from torchmem.collect.sites import SiteFinder, is_user_file
from torchmem.errors import UsageError
from torchmem.model.lines import LineProfile, LineRecord, LineWindow
from torchmem.units import format_bytes, format_delta

__all__ = ["profile_lines", "LinesReport"]


@dataclass(frozen=True)
class LinesReport:
    """What :func:`profile_lines` measured.

    Attributes:
        lines: the ranked per-line records (figures per call).
        profile: how they were measured: one window per call, the peak, the
            allocation sites.
        result: what the last call returned.
    """

    lines: tuple[LineRecord, ...]
    profile: LineProfile
    result: Any = None

    def find(self, line: int, file: str | None = None) -> LineRecord | None:
        """The record of ``line`` (of ``file`` when given, matched by its end)."""
        for row in self.lines:
            if row.line == line and (file is None or row.file.endswith(file)):
                return row
        return None

    def __repr__(self) -> str:
        rows = [f"LinesReport({len(self.lines)} lines, {len(self.profile.profiled)} calls, "
                f"peak {format_bytes(self.profile.peak_bytes)})"]
        for row in self.lines[:10]:
            keeps = (f"  keeps {format_bytes(row.retained_bytes)}/call: {row.retains}"
                     if row.retains else "")
            rows.append(f"  {row.where:<24} alloc {format_bytes(row.allocated_bytes):>10}  "
                        f"alive {format_bytes(row.alive_bytes):>10}  "
                        f"Δ {format_delta(row.delta_bytes):>11}  "
                        f"peak {100 * row.peak_share:5.1f}%  {row.code}{keeps}")
        return "\n".join(rows)


def profile_lines(fn: Callable[..., Any], *args: Any, steps: int = 3, all_files: bool = False,
                  **kwargs: Any) -> LinesReport:
    """Measure the CPU tensor memory of each line ``fn`` runs, over ``steps`` calls.

    Args:
        fn: the function to call (a training step, a forward pass...).
        *args, **kwargs: its arguments, the same for every call.
        steps: how many calls (each one is profiled; figures are per call).
        all_files: attribute to library lines too, not only the user's own files.

    Returns:
        A :class:`LinesReport`.

    Raises:
        UsageError: ``steps`` < 1, or another line profile runs in this process.
        Whatever ``fn`` raises (the profile is dropped; nothing stays installed).

    Example:
        >>> report = torchmem.profile_lines(train_step, batch, steps=3)  # doctest: +SKIP
        >>> report.lines[0].where                                        # doctest: +SKIP
        'train.py:42'
    """
    if steps < 1:
        raise UsageError(f"torchmem.profile_lines: steps must be at least 1; got {steps}")
    from torchmem.doctor.line_probe import source_line
    from torchmem.doctor.line_sites import peak_sites

    recorder = LineRecorder(SiteFinder(is_user_file, all_files))
    recorder.install()
    windows: list[LineWindow] = []
    result: Any = None
    try:
        for step in range(1, steps + 1):
            recorder.begin(step, "step")
            try:
                result = fn(*args, **kwargs)
            finally:
                window = recorder.end()
            if window is not None:
                windows.append(LineWindow(
                    step=step, delta_bytes=window.measured_delta or 0,
                    peak_bytes=window.peak_bytes or 0, allocated_bytes=window.allocated,
                    unattributed_bytes=window.unattributed, seconds=round(window.seconds, 6)))
        rows = recorder.totals.rows(source_line)
        rows = [r for r in rows if r.allocated_bytes or r.peak_bytes or r.delta_bytes]
        retaining = _retaining(recorder, steps, sys._getframe(1), fn)
    finally:
        recorder.uninstall()
    totals = recorder.totals
    profile = LineProfile(
        steps=steps, profiled=tuple(windows), peak_step=totals.peak_step,
        peak_bytes=totals.peak.bytes if totals.peak else 0,
        unattributed_bytes=round(sum(w.unattributed_bytes for w in windows) / len(windows)),
        all_files=all_files, budget=None, sites=tuple(peak_sites(recorder, totals.peak_step)))
    for keeper in retaining:
        for i, row in enumerate(rows):
            if row.line == keeper.line and row.file == keeper.file:
                rows[i] = replace(row, retained_bytes=keeper.retained_bytes,
                                  retains=keeper.retains)
                break
        else:
            rows.append(keeper)
    return LinesReport(tuple(rank_rows(rows)), profile, result)


def _retaining(recorder: LineRecorder, steps: int, caller: Any,
               fn: Callable[..., Any]) -> list[LineRecord]:
    """The statement that keeps storages of earlier calls alive, if any (one record)."""
    if steps < 2:
        return []
    from torchmem.collect._engine import engine
    from torchmem.doctor.holders import holder_paths
    from torchmem.doctor.line_probe import source_line
    from torchmem.doctor.source import find_statements
    from torchmem.doctor.statement_rank import best_statement

    kept: dict[int, tuple[int, Any]] = {}
    last = recorder.serial - 1
    for ref in list(engine._refs.values()):
        birth = getattr(ref, "site", None)
        if birth is not None and birth[1] < last and ref.dev == "cpu" and ref() is not None:
            kept[ref.key] = (ref.nbytes, birth)
    if not kept:
        return []
    globals_ = getattr(fn, "__globals__", None)
    holders = holder_paths(kept, caller, globals_, is_user_file)
    by_path: dict[str, int] = {}
    for key, path in holders.items():
        root = path.split(" of ", 1)[-1]
        by_path[root] = by_path.get(root, 0) + kept[key][0]
    if not by_path:
        return []
    path, held = max(by_path.items(), key=lambda kv: kv[1])
    files = sorted({b[0][0] for _, b in kept.values()} | {caller.f_code.co_filename}
                   | ({globals_.get("__file__")} if globals_ and globals_.get("__file__") else set()))
    statements = find_statements(path, [f for f in files if f])
    if not statements:
        statements = _in_function(fn, path)
    statement = best_statement(statements)
    if statement is None:
        return []
    per_call = held // max(steps - 1, 1)
    return [LineRecord(file=statement.file, line=statement.line,
                       code=statement.code or source_line(statement.file, statement.line),
                       function=statement.function, retained_bytes=per_call,
                       retains=f"{path} (kept across calls)")]


def _in_function(fn: Callable[..., Any], path: str) -> list[Any]:
    """The doctor's statement search in ``fn``'s own source, for code whose file is not a
    Python file (a notebook cell, a page of documentation run by a test, ``exec``)."""
    import ast
    import inspect
    import linecache
    import textwrap

    from torchmem.doctor.source import _Finder, parse_path

    try:
        code = fn.__code__  # type: ignore[attr-defined]
        block, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(block)))
    except (AttributeError, OSError, TypeError, SyntaxError, ValueError):
        return []
    ast.increment_lineno(tree, start - 1)
    lines = tuple(line.rstrip("\n") for line in linecache.getlines(code.co_filename))
    finder = _Finder(code.co_filename, lines, parse_path(path), False)
    finder.visit(tree)
    return list(finder.found)
