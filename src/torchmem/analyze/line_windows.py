"""Per-line arithmetic of profiled steps: tallies, the peak's composition, the ranked rows.

A profiled step (a *window*) is a stream of events, each ``(site, bytes, token)``: a
storage created (``+bytes``) or grown, or freed (``-bytes``), at a :data:`Site`
``(file, line, function)`` -- the site that *created* the storage, also for its free --
or ``None`` for a storage whose origin is unknown (made before profiling, or in a step
that was not profiled). ``token`` identifies the storage (opaque here). The CPU engine
(:mod:`torchmem.collect.lines`) and a CUDA memory snapshot
(:mod:`torchmem.analyze.cuda_history`) both produce such streams, so one piece of
arithmetic serves both:

* per site: bytes created, created-and-alive at the end, and the net change (created
  minus freed of its storages of any age); the nets of all sites plus the unattributed
  bytes equal the window's delta, exactly;
* the peak: replaying the stream from the live bytes at the window's start gives the
  highest total, when it happened, how much each site held then and which storages were
  alive.

No torch; cost linear in the events of a window.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from torchmem.model.capture import Finding
from torchmem.model.lines import LineRecord

__all__ = ["Site", "WindowTally", "PeakState", "LineTotals", "rank_rows", "retaining_rows"]

Site = tuple[str, int, str]


@dataclass
class PeakState:
    """What was alive at the highest point of a window.

    Attributes:
        bytes: live bytes at the peak (the window's start included).
        index: events replayed when it was reached (0: at the start).
        by_site: site -> bytes alive at the peak (``None``: unknown origin).
        tokens: the storages alive then, as ``id(token) -> (token, bytes)`` (only when
            asked; tokens need not be hashable).
    """

    bytes: int
    index: int
    by_site: dict[Site | None, int]
    tokens: dict[int, tuple[Any, int]] = field(default_factory=dict)


@dataclass
class WindowTally:
    """The events of one profiled step and their per-site sums.

    Attributes:
        step: the step (0: setup).
        device: the device of these events.
        start_live: site -> bytes alive when the window began (``None``: origin unknown).
        start_tokens: ``id(token) -> (token, site, bytes)`` of the storages alive then,
            when known (to list the storages alive at the peak).
        events: ``(site, bytes, token)`` in order.
        created, count, freed, own_freed: per-site bytes created, storages created,
            bytes freed (storages of any age), bytes freed of storages created in this
            window.
        unattributed: net bytes of storages of unknown origin (frees, mostly).
        measured_delta: the window's delta as measured by the collector, if known.
        seconds: wall time.
        steady: a whole training step (False: the setup before the first steps, or
            the end of the run); only steady windows enter the per-step means.
        peak_bytes: the window's peak, once computed (the events may be dropped then).
        paired: the step before this one was profiled too, so the storages of the
            previous step that this one frees have a line: only such windows enter
            the per-line net change (``delta``) means.
    """

    step: int
    device: str = "cpu"
    steady: bool = True
    peak_bytes: int | None = None
    paired: bool = True
    start_live: dict[Site | None, int] = field(default_factory=dict)
    start_tokens: dict[int, tuple[Any, Site | None, int]] = field(default_factory=dict)
    events: list[tuple[Site | None, int, Any]] = field(default_factory=list)
    created: dict[Site, int] = field(default_factory=dict)
    count: dict[Site, int] = field(default_factory=dict)
    freed: dict[Site, int] = field(default_factory=dict)
    own_freed: dict[Site, int] = field(default_factory=dict)
    unattributed: int = 0
    measured_delta: int | None = None
    seconds: float = 0.0

    # -- events ----------------------------------------------------------------------
    def add(self, site: Site | None, nbytes: int, token: Any, new: bool = True) -> None:
        """A storage created (``new``) or grown by ``nbytes`` at ``site``."""
        self.events.append((site, nbytes, token))
        if site is None:
            self.unattributed += nbytes
            return
        self.created[site] = self.created.get(site, 0) + nbytes
        if new:
            self.count[site] = self.count.get(site, 0) + 1

    def remove(self, site: Site | None, nbytes: int, token: Any, own: bool) -> None:
        """A storage of ``nbytes`` made at ``site`` freed; ``own``: made in this window."""
        self.events.append((site, -nbytes, token))
        if site is None:
            self.unattributed -= nbytes
            return
        self.freed[site] = self.freed.get(site, 0) + nbytes
        if own:
            self.own_freed[site] = self.own_freed.get(site, 0) + nbytes

    # -- sums ------------------------------------------------------------------------
    def delta(self, site: Site) -> int:
        """Net bytes of ``site`` over the window."""
        return self.created.get(site, 0) - self.freed.get(site, 0)

    def alive(self, site: Site) -> int:
        """Bytes created at ``site`` in this window and alive at its end."""
        return self.created.get(site, 0) - self.own_freed.get(site, 0)

    @property
    def attributed_delta(self) -> int:
        """The sum of every site's net bytes plus the unattributed bytes."""
        return sum(self.created.values()) - sum(self.freed.values()) + self.unattributed

    @property
    def allocated(self) -> int:
        """Bytes created during the window (all sites)."""
        return sum(self.created.values()) + max(
            0, sum(n for s, n, _ in self.events if s is None and n > 0))

    def peak(self, with_tokens: bool = False) -> PeakState:
        """Replay the window: the highest live total, and what made it up."""
        total = sum(self.start_live.values())
        best, best_index = total, 0
        for i, (_, n, _t) in enumerate(self.events, 1):
            total += n
            if total > best:
                best, best_index = total, i
        by_site = dict(self.start_live)
        tokens: dict[int, tuple[Any, int]] = {}
        if with_tokens:
            tokens = {k: (t, n) for k, (t, _, n) in self.start_tokens.items()}
        for site, n, token in self.events[:best_index]:
            by_site[site] = by_site.get(site, 0) + n
            if with_tokens:
                key = id(token)
                left = tokens.get(key, (token, 0))[1] + n
                if left > 0:
                    tokens[key] = (token, left)
                else:
                    tokens.pop(key, None)
        return PeakState(best, best_index, {s: n for s, n in by_site.items() if n}, tokens)


@dataclass
class LineTotals:
    """Per-site sums over the profiled steps of a run (the setup window apart).

    Attributes:
        windows: steady windows added; ``paired``: those of them that were paired.
        created, alive, count: per-site sums over the steady windows; ``delta`` and
            ``unattributed`` over the paired ones.
        setup: per-site bytes created in the windows that are not steps (setup, end).
        peak: the highest :class:`PeakState` seen and ``peak_step`` its window.
    """

    device: str = "cpu"
    windows: int = 0
    paired: int = 0
    created: dict[Site, int] = field(default_factory=dict)
    alive: dict[Site, int] = field(default_factory=dict)
    delta: dict[Site, int] = field(default_factory=dict)
    count: dict[Site, int] = field(default_factory=dict)
    setup: dict[Site, int] = field(default_factory=dict)
    unattributed: int = 0
    peak: PeakState | None = None
    peak_step: int | None = None

    def add(self, w: WindowTally, peak: PeakState | None = None) -> None:
        """Fold a finished window in (``peak``: its :meth:`WindowTally.peak`, if taken)."""
        if peak is not None and (self.peak is None or peak.bytes > self.peak.bytes):
            self.peak, self.peak_step = peak, w.step
        if not w.steady:
            for site, n in w.created.items():
                self.setup[site] = self.setup.get(site, 0) + n
            return
        self.windows += 1
        if w.paired:
            self.paired += 1
            self.unattributed += w.unattributed
        sites = set(w.created) | set(w.freed)
        for site in sites:
            for target, value in ((self.created, w.created.get(site, 0)),
                                  (self.alive, w.alive(site)),
                                  (self.delta, w.delta(site) if w.paired else 0),
                                  (self.count, w.count.get(site, 0))):
                if value:
                    target[site] = target.get(site, 0) + value

    def rows(self, code_of: Callable[[str, int], str] = lambda f, n: "") -> list[LineRecord]:
        """One :class:`LineRecord` per site, figures per profiled step (means)."""
        n = self.windows or 1
        n_paired = self.paired or 1
        peak = self.peak
        peak_bytes = peak.bytes if peak is not None else 0
        at_peak = peak.by_site if peak is not None else {}
        sites: set[Site] = set(self.created) | set(self.delta) | set(self.setup)
        sites.update(s for s in at_peak if s is not None)
        rows = []
        for site in sites:
            if self.windows:
                created, alive = self.created.get(site, 0), self.alive.get(site, 0)
                delta, count = self.delta.get(site, 0), self.count.get(site, 0)
            else:  # nothing but the setup was profiled: show it
                created = alive = self.setup.get(site, 0)
                delta, count = created, 0
            held = max(at_peak.get(site, 0), 0)
            rows.append(LineRecord(
                file=site[0], line=max(site[1], 0), code=code_of(site[0], site[1]),
                function=site[2], device=self.device,
                allocated_bytes=max(round(created / n), 0), alive_bytes=max(round(alive / n), 0),
                delta_bytes=round(delta / (n_paired if self.windows else 1)),
                allocations=round(count / n),
                peak_bytes=held, peak_share=min(held / peak_bytes, 1.0) if peak_bytes > 0 else 0.0,
            ))
        return rows


def _same_file(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def retaining_rows(rows: Sequence[LineRecord], findings: Iterable[Finding],
                   code_of: Callable[[str, int], str] = lambda f, n: "") -> list[LineRecord]:
    """``rows`` with each finding's culprit line marked as retaining (added if absent)."""
    out = list(rows)
    for finding in findings:
        culprit = finding.culprit
        if culprit is None or not culprit.file or not culprit.line:
            continue
        per_step = max(int(round(finding.bytes_per_step)), 0)
        what = f"{culprit.name} ({finding.cause})" if culprit.name else finding.cause
        for i, row in enumerate(out):
            if row.line == culprit.line and _same_file(row.file, culprit.file):
                if row.retains is None:
                    out[i] = _replace(row, retained_bytes=per_step, retains=what)
                break
        else:
            out.append(LineRecord(file=culprit.file, line=culprit.line,
                                  code=culprit.code or code_of(culprit.file, culprit.line),
                                  function=culprit.function or "", device=finding.device,
                                  retained_bytes=per_step, retains=what))
    return out


def _replace(row: LineRecord, **changes: Any) -> LineRecord:
    from dataclasses import replace

    return replace(row, **changes)


def rank_rows(rows: Iterable[LineRecord]) -> list[LineRecord]:
    """Rank lines: those that keep a leak alive first (by bytes per step, in finding
    order when tied), then by growth per step, bytes at the peak, bytes allocated."""
    indexed = list(enumerate(rows))
    indexed.sort(key=lambda item: (
        0 if item[1].retains is not None else 1,
        -item[1].retained_bytes if item[1].retains is not None else 0,
        item[0] if item[1].retains is not None else 0,
        -max(item[1].delta_bytes, 0), -item[1].peak_bytes, -item[1].allocated_bytes,
        item[1].file, item[1].line))
    return [row for _, row in indexed]
