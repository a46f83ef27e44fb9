"""Merge the captures of every rank of one distributed run into one report (pure, no torch).

:func:`merge_ranks` checks that the captures belong to one run (same tool, script and
world size, one capture per rank, same ``torchrun`` run id when recorded, run times that
overlap), summarises each rank on its own device (:func:`summarize_rank`), measures
the spread of each census role across ranks (:func:`role_spreads`) and lines the
findings up by cause and culprit (:func:`findings_across_ranks`). Cost: linear in the
captures' steps and findings; a few milliseconds for hundreds of ranks.

Example:
    >>> from torchmem.model.capture import Capture
    >>> def cap(rank):
    ...     return Capture(tool="torchmem run", version="0", argv=("t.py",), started_at="",
    ...                    duration_s=1.0, exit_code=0, outcome="ok", devices=("cpu",),
    ...                    peak={"cpu": 100 + 50 * rank},
    ...                    environment={"rank": str(rank), "world_size": "2"})
    >>> merge_ranks([("a.json", cap(0)), ("b.json", cap(1))]).heaviest.rank
    1

Known limitations:
    * Each rank is compared on one device: its accelerator if the capture names one,
      else the CPU (the C heap, which counts every C allocation, not only tensors).
    * Findings are matched by cause, culprit name and ``file:line`` (the file's base
      name, so ranks on hosts with different checkout paths still match).
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Iterable, Sequence

from torchmem.errors import CaptureError
from torchmem.model.capture import Capture, Finding
from torchmem.model.rank_report import (
    FindingAcrossRanks,
    MergedRankReport,
    RankSummary,
    RoleSpread,
)
from torchmem.units import format_bytes

__all__ = ["rank_of", "summarize_rank", "check_same_run", "role_spreads",
           "findings_across_ranks", "merge_ranks", "MAX_CHART_POINTS", "SAME_RUN_SLACK_S"]

#: most per-step points a rank summary keeps for the merged chart (evenly thinned)
MAX_CHART_POINTS = 400
#: seconds two ranks' run times may be apart and still count as one run
SAME_RUN_SLACK_S = 120.0


def rank_of(capture: Capture) -> tuple[int, int] | None:
    """``(rank, world_size)`` the capture recorded (``torchrun``'s ``RANK`` and
    ``WORLD_SIZE``), or None when it was not recorded in a distributed run."""
    env = capture.environment
    try:
        rank, world = int(env["rank"]), int(env.get("world_size", "0"))
    except (KeyError, ValueError):
        return None
    if world < 1 or not 0 <= rank < world:
        return None
    return rank, world


def _device(capture: Capture) -> str:
    """The accelerator the rank used (the one with the highest peak), else ``cpu``."""
    devices = [d for d in capture.devices if d != "cpu"]
    if devices:
        return max(devices, key=lambda d: (capture.peak.get(d, 0), d))
    return "cpu" if "cpu" in capture.devices or not capture.devices else capture.devices[0]


def _thin(points: list[tuple[int, int]], most: int = MAX_CHART_POINTS) -> list[tuple[int, int]]:
    if len(points) <= most:
        return points
    stride = (len(points) - 1) / (most - 1)
    return [points[round(i * stride)] for i in range(most)]


def summarize_rank(capture: Capture, source: str, rank: int | None = None) -> RankSummary:
    """One rank's figures on its device (see :class:`RankSummary`).

    Args:
        capture: the rank's capture.
        source: where it came from, as the report names it.
        rank: its rank (default: the one the capture recorded, else 0).
    """
    if rank is None:
        known = rank_of(capture)
        rank = known[0] if known else 0
    device = _device(capture)
    points = [(s.step, s.used[device]) for s in capture.steps if device in s.used]
    growth = next((g for g in capture.growth if g.device == device), None)
    steps = max(capture.steps[-1].step, len(capture.steps)) if capture.steps else 0
    chart = _thin(points)
    return RankSummary(
        rank=rank, source=source, device=device,
        measure="C heap in use" if device == "cpu" else "allocated",
        peak=capture.peak.get(device), first=points[0][1] if points else None,
        last=points[-1][1] if points else None,
        verdict=growth.verdict if growth else "none",
        bytes_per_step=growth.bytes_per_step if growth else 0.0, steps=steps,
        step_numbers=tuple(p[0] for p in chart), step_used=tuple(p[1] for p in chart),
        exit_code=capture.exit_code, outcome=capture.outcome, duration_s=capture.duration_s,
        bytes_by_role=dict(capture.bytes_by_role),
        findings=tuple(sorted(capture.findings, key=lambda f: -f.bytes)),
    )


def _interval(capture: Capture) -> tuple[float, float] | None:
    try:
        start = _dt.datetime.fromisoformat(capture.started_at).timestamp()
    except (TypeError, ValueError, OverflowError, OSError):
        return None
    return start, start + max(capture.duration_s, 0.0)


def check_same_run(captures: Sequence[tuple[str, Capture]]) -> int:
    """Check that ``captures`` (``(source, capture)`` pairs) are ranks of one run.

    Returns:
        The run's world size.

    Raises:
        CaptureError: one line naming the two sources that disagree, and how (a capture
            without a rank, different world sizes, tools, scripts or ``torchrun`` run
            ids, the same rank twice, or run times too far apart to be one run).
    """
    if not captures:
        raise CaptureError("no captures to merge; expected one capture per rank")
    seen: dict[int, str] = {}
    first_source, first = captures[0]
    world = 0
    for source, capture in captures:
        known = rank_of(capture)
        if known is None:
            raise CaptureError(
                f"{source} has no rank; expected a capture recorded under torchrun (its "
                "environment names rank and world_size)",
                tip="record one capture per rank: torchrun ... -m torchmem doctor --json run.json")
        rank, size = known
        if world and size != world:
            raise CaptureError(f"captures are from different runs: {first_source} has world "
                               f"size {world}, {source} has world size {size}")
        world = size
        if seen.get(rank) == source:
            raise CaptureError(f"{source} is named twice; expected one capture per rank")
        if rank in seen:
            raise CaptureError(f"{seen[rank]} and {source} are both rank {rank}; expected "
                               "one capture per rank")
        seen[rank] = source
        for what, mine, theirs in (
            ("were recorded by", capture.tool, first.tool),
            ("ran", " ".join(capture.argv), " ".join(first.argv)),
            ("have torchrun run id", capture.environment.get("run_id"),
             first.environment.get("run_id")),
        ):
            if mine != theirs:
                raise CaptureError(f"captures are from different runs: {first_source} and "
                                   f"{source} {what} {theirs!r} and {mine!r}")
    intervals = [(s, i) for s, c in captures if (i := _interval(c)) is not None]
    if intervals:
        latest = max(intervals, key=lambda si: si[1][0])
        earliest_end = min(intervals, key=lambda si: si[1][1])
        if latest[1][0] - earliest_end[1][1] > SAME_RUN_SLACK_S:
            gap = latest[1][0] - earliest_end[1][1]
            raise CaptureError(
                f"captures are from different runs: {latest[0]} started {gap:.0f} s after "
                f"{earliest_end[0]} had ended; expected ranks that ran at the same time")
    return world


def role_spreads(ranks: Sequence[RankSummary]) -> tuple[RoleSpread, ...]:
    """Each census role's bytes on every rank, largest spread first (roles no rank holds
    are left out; empty when no rank has a census)."""
    if not any(r.bytes_by_role for r in ranks):
        return ()
    names = sorted({role for r in ranks for role in r.bytes_by_role})
    spreads = []
    for role in names:
        values = tuple(r.bytes_by_role.get(role, 0) for r in ranks)
        if not any(values):
            continue
        high = max(range(len(ranks)), key=lambda i: (values[i], -ranks[i].rank))
        low = min(range(len(ranks)), key=lambda i: (values[i], ranks[i].rank))
        spreads.append(RoleSpread(role, values, ranks[high].rank, ranks[low].rank,
                                  values[high] - values[low]))
    return tuple(sorted(spreads, key=lambda s: (-s.spread, -max(s.bytes), s.role)))


def _key(finding: Finding) -> tuple[str, str, str, int]:
    c = finding.culprit
    if c is None:
        return finding.cause, finding.title, "", 0
    return finding.cause, c.name, os.path.basename(c.file or ""), c.line or 0


def _ranks_text(ranks: Iterable[int]) -> str:
    items = [str(r) for r in ranks]
    return f"rank {items[0]}" if len(items) == 1 else f"ranks {', '.join(items)}"


def findings_across_ranks(ranks: Sequence[RankSummary],
                          tolerance: float = 0.1) -> tuple[FindingAcrossRanks, ...]:
    """The findings of every rank, matched by cause and culprit: those that differ
    between ranks first (present on some ranks only, or bytes further apart than
    ``tolerance`` of the largest), then by bytes."""
    groups: dict[tuple[str, str, str, int], list[tuple[int, Finding]]] = {}
    for summary in ranks:
        for finding in summary.findings:
            groups.setdefault(_key(finding), []).append((summary.rank, finding))
    everyone = [r.rank for r in ranks]
    out = []
    for members in groups.values():
        members.sort(key=lambda m: m[0])
        first = members[0][1]
        held = [f.bytes for _, f in members]
        on = [rank for rank, _ in members]
        everywhere = set(on) >= set(everyone)
        if not everywhere:
            absent = [r for r in everyone if r not in on]
            why = (f"on {_ranks_text(on)} only" if len(on) <= len(absent)
                   else f"on every rank but {_ranks_text(absent)}")
            differs = True
        elif len(on) > 1 and max(held) - min(held) > tolerance * max(held):
            top = on[held.index(max(held))]
            why = (f"on every rank; {format_bytes(max(held))} on rank {top}, "
                   f"{format_bytes(min(held))} on rank {on[held.index(min(held))]}")
            differs = True
        else:
            why, differs = "the same on every rank", False
        out.append(FindingAcrossRanks(
            cause=first.cause, title=first.title, culprit=first.culprit, fix=first.fix,
            ranks=tuple(on), bytes=tuple(held),
            bytes_per_step=tuple(f.bytes_per_step for _, f in members),
            everywhere=everywhere, differs=differs, why=why))
    return tuple(sorted(out, key=lambda f: (not f.differs, -max(f.bytes), f.cause)))


def merge_ranks(captures: Sequence[tuple[str, Capture]], tolerance: float = 0.1,
                notes: Sequence[str] = ()) -> MergedRankReport:
    """Merge the captures of one run's ranks into one report.

    Args:
        captures: ``(source, capture)`` pairs, one per rank, in any order.
        tolerance: spread, as a fraction of the heaviest, above which ranks are
            imbalanced and a finding's bytes differ.
        notes: sentences to carry into the report (e.g. why a rank is missing).

    Returns:
        The :class:`~torchmem.model.rank_report.MergedRankReport`; ranks of the run
        without a capture are listed in ``missing``.

    Raises:
        CaptureError: the captures are not the ranks of one run (:func:`check_same_run`).
        ValueError: ``tolerance`` outside [0, 1].
    """
    if not 0 <= tolerance <= 1:
        raise ValueError(f"tolerance must be in [0, 1]; got {tolerance}")
    world = check_same_run(captures)
    ranks = tuple(sorted((summarize_rank(c, source) for source, c in captures),
                         key=lambda r: r.rank))
    present = {r.rank for r in ranks}
    extra = list(notes)
    measures = sorted({f"{r.measure} on {r.device.split(':')[0]}" for r in ranks})
    if len(measures) > 1:
        extra.append(f"the ranks' figures differ in kind ({', '.join(measures)}); their "
                     "peaks compare poorly")
    first = captures[0][1]
    return MergedRankReport(
        tool=first.tool, argv=tuple(first.argv), world_size=world, ranks=ranks,
        missing=tuple(r for r in range(world) if r not in present),
        roles=role_spreads(ranks), findings=findings_across_ranks(ranks, tolerance),
        tolerance=tolerance, notes=tuple(extra))
