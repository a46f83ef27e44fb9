"""The merged report of every rank as plain text (no torch, no rich).

:func:`rank_report_lines` returns the lines ``torchmem report run.rank*.json`` prints and
rank 0 prints at the end of ``torchrun ... -m torchmem doctor``: a table with each rank's
peak and growth per step, the verdict on the peaks (balanced or which rank holds how much
more), which ranks grow, the census roles that differ most between ranks, and the
findings compared across ranks (those on some ranks only, or with different bytes,
first). Every string of the report is escaped first (:mod:`torchmem.report.sanitize`).
"""

from __future__ import annotations

import os
from typing import IO, Sequence

from torchmem.model.rank_report import FindingAcrossRanks, MergedRankReport
from torchmem.report.sanitize import printable_capture
from torchmem.units import format_bytes, format_delta

__all__ = ["rank_report_lines", "render_rank_report", "peak_verdict", "growth_verdict",
           "MAX_ROLES", "MAX_RATES"]

#: most census roles listed (largest spread first)
MAX_ROLES = 8
#: most growing ranks whose rate the growth verdict names (fastest first)
MAX_RATES = 8


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), *(line(r) for r in rows)]


def _bytes(n: int | None) -> str:
    return format_bytes(n) if n is not None else "n/a"


def _ranks(ranks: Sequence[int]) -> str:
    return (f"rank {ranks[0]}" if len(ranks) == 1
            else "ranks " + ", ".join(str(r) for r in ranks))


def peak_verdict(report: MergedRankReport) -> str:
    """One line: are the ranks' peaks balanced, or which rank peaks how much higher."""
    high, low = report.heaviest, report.lightest
    if high is None or low is None:
        return "no rank recorded a peak"
    if len(report.ranks) < 2:
        return f"one rank: peak {_bytes(high.peak)} on {high.device}"
    what = f"{high.measure} on {high.device}" + (
        f" and {low.device}" if low.device != high.device else "")
    if report.peak_spread == 0:
        return f"balanced: every rank peaks at {_bytes(high.peak)} ({what})"
    share = report.peak_spread / (high.peak or 1)
    verdict = "imbalanced" if report.imbalanced else "balanced"
    within = "" if report.imbalanced else f", within the {report.tolerance:.0%} tolerance"
    return (f"{verdict}: rank {high.rank} peaks {format_bytes(report.peak_spread)} above "
            f"rank {low.rank} ({_bytes(high.peak)} vs {_bytes(low.peak)} of {what}, "
            f"{share:.0%} of the heaviest{within})")


def growth_verdict(report: MergedRankReport) -> str:
    """One line: which ranks' memory grows per step, and by how much."""
    growing = [r for r in report.ranks if r.verdict == "growing"]
    if not growing:
        return "no rank's memory grows per step"
    fastest = sorted(growing, key=lambda r: (-r.bytes_per_step, r.rank))
    shown = [f"rank {r.rank} {format_delta(r.bytes_per_step)}/step" for r in fastest[:MAX_RATES]]
    if len(growing) > MAX_RATES:
        shown.append(f"{len(growing) - MAX_RATES} more")
    if len(growing) == len(report.ranks):
        return f"memory grows on every rank, fastest first: {', '.join(shown)}"
    others = [r.rank for r in report.ranks if r.verdict != "growing"]
    return (f"memory grows on {_ranks([r.rank for r in growing])} only ({', '.join(shown)}); "
            f"not on {_ranks(others)}")


def _rank_rows(report: MergedRankReport) -> list[str]:
    rows = []
    for r in report.ranks:
        growth = format_delta(r.bytes_per_step) if r.verdict != "none" else "n/a"
        rows.append([str(r.rank), r.device, _bytes(r.peak), _bytes(r.first), _bytes(r.last),
                     growth, r.verdict, str(r.steps), str(r.exit_code), str(len(r.findings))])
    return _table(["rank", "device", "peak", "at first step", "at last step", "growth/step",
                   "verdict", "steps", "exit", "findings"], rows, {0, 2, 3, 4, 5, 7, 8, 9})


def _role_rows(report: MergedRankReport) -> list[str]:
    rows = [[s.role, f"rank {s.heaviest}: {format_bytes(max(s.bytes))}",
             f"rank {s.lightest}: {format_bytes(min(s.bytes))}", format_bytes(s.spread)]
            if s.spread else [s.role, f"every rank: {format_bytes(max(s.bytes))}", "", "0 B"]
            for s in report.roles[:MAX_ROLES]]
    return _table(["role", "heaviest", "lightest", "spread"], rows, {3})


def _where(f: FindingAcrossRanks) -> str:
    c = f.culprit
    if c is None:
        return ""
    name = f"`{c.name}`"
    if c.file:
        name += f" ({os.path.basename(c.file)}" + (f":{c.line})" if c.line else ")")
    return f": {name}"


def _finding_lines(index: int, f: FindingAcrossRanks) -> list[str]:
    lines = [f"  [{index}] {f.title}{_where(f)}: {f.why}"]
    for rank, held, rate in zip(f.ranks, f.bytes, f.bytes_per_step):
        size = [f"{format_delta(rate)}/step"] if rate else []
        size.append(f"{format_bytes(held)} held")
        lines.append(f"      rank {rank}: {', '.join(size)}")
    if f.fix:
        lines.append(f"      fix: {f.fix}")
    return lines


def _findings(report: MergedRankReport) -> list[str]:
    differ = [f for f in report.findings if f.differs]
    same = [f for f in report.findings if not f.differs]
    lines: list[str] = []
    index = 1
    for title, group in (("findings that differ between ranks", differ),
                         ("findings the same on every rank", same)):
        if not group:
            continue
        lines += ["", title]
        for f in group:
            lines += _finding_lines(index, f)
            index += 1
    if not report.findings and report.tool.endswith("doctor"):
        lines += ["", "no findings on any rank"]
    return lines


def rank_report_lines(report: MergedRankReport) -> list[str]:
    """The merged report as text lines (every capture string escaped)."""
    report = printable_capture(report)
    present = len(report.ranks)
    head = (f"{report.tool}: {present} rank{'s' if present != 1 else ''} of "
            f"{report.script} (world size {report.world_size})")
    lines = [head, ""]
    lines += _rank_rows(report)
    lines += ["", peak_verdict(report), growth_verdict(report)]
    if report.roles:
        lines += ["", "live tensor bytes by role at the end (census), largest spread first"]
        lines += ["  " + line for line in _role_rows(report)]
    lines += _findings(report)
    failed = [r for r in report.ranks if r.outcome not in ("ok", "max_steps")]
    if report.missing or failed:
        lines.append("")
    if report.missing:
        lines.append(f"missing: {_ranks(list(report.missing))} of {report.world_size} "
                     "(no capture)")
    for r in failed:
        lines.append(f"rank {r.rank} ended with {r.outcome} (exit code {r.exit_code})")
    lines += [f"note: {n}" for n in report.notes]
    return lines


def render_rank_report(report: MergedRankReport, file: IO[str]) -> None:
    """Print the merged report on ``file``."""
    print("\n".join(rank_report_lines(report)), file=file)
