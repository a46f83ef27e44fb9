"""Analyse a CUDA memory snapshot file into a :class:`~torchmem.model.snapshot.SnapshotReport`.

``analyze_snapshot("snapshot.pickle")`` reads the file with the restricted streaming
reader (:mod:`torchmem.model.snapshot_pickle`: nothing in the file can run), follows each
device's trace (:mod:`torchmem.analyze.snapshot_trace`), sums the final segments
(:mod:`torchmem.analyze.snapshot_state`), and derives:

* the timeline of allocated and reserved bytes, made absolute with the final segments
  (the trace may start after allocations were made: recording started late, or the ring
  buffer of ``max_entries`` wrapped);
* the peak and the allocations alive at it, grouped by stack, the script's frames first;
* the fragmentation verdict of :func:`torchmem.analyze.fragmentation.judge` on the final
  segments (with the trace's out-of-memory entries and flush-and-retry runs);
* a growth verdict on the lowest allocated level of successive windows of the trace;
* findings: ``fragmentation`` (split free blocks) and ``cache_thrash`` (segments handed
  back by ``torch.cuda.empty_cache()`` and requested from the driver again).

Never imports torch: a snapshot recorded on a GPU machine is analysed anywhere.
Cost: see :mod:`torchmem.model.snapshot_pickle` (a few µs per trace entry).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections import defaultdict
from typing import Any

from torchmem import __version__
from torchmem.analyze.fragmentation import FRAGMENTED_FLOOR, FRAGMENTED_RATIO, judge
from torchmem.analyze.growth import fit_line, theil_sen
from torchmem.analyze.snapshot_state import SegmentState, as_stats, segment_state, split_frames
from torchmem.analyze.snapshot_trace import DeviceTrace
from torchmem.model.capture import Culprit, Finding
from torchmem.model.snapshot import (AllocationSite, DeviceSnapshot, FlushSite, OomEvent,
                                     SnapshotReport, TraceGrowth)
from torchmem.model.snapshot_pickle import MAX_SNAPSHOT_BYTES, read_snapshot
from torchmem.units import MiB, format_bytes

__all__ = ["analyze_snapshot", "TOP_SITES", "GROWTH_WINDOWS"]

#: Groups of allocations listed at the peak.
TOP_SITES = 10
#: Windows the trace is cut into for the growth verdict.
GROWTH_WINDOWS = 24
#: Least rise across the trace called growth.
GROWTH_FLOOR = 16 * MiB
#: Least ``empty_cache()`` flushes called thrash.
THRASH_RUNS = 3
#: Every number of a report stays below this in magnitude (it is JSON read back later).
_BOUND = 1 << 63


def analyze_snapshot(path: str | os.PathLike[str], *, top: int = TOP_SITES,
                     max_bytes: int = MAX_SNAPSHOT_BYTES) -> SnapshotReport:
    """Read and analyse a snapshot written by ``torch.cuda.memory._dump_snapshot``.

    Raises:
        SnapshotError: the file is refused (see :func:`~torchmem.model.snapshot_pickle
            .read_snapshot`).
    """
    started = time.perf_counter()
    data = read_snapshot(path, DeviceTrace, max_bytes=max_bytes)
    by_device: dict[int, list[Any]] = defaultdict(list)
    for seg in data.top["segments"]:
        device = seg.get("device", 0) if type(seg) is dict else 0
        by_device[device if type(device) is int and 0 <= device < 1 << 16 else 0].append(seg)
    indices = sorted(set(by_device) | {i for i, s in enumerate(data.sinks) if s is not None})
    notes: list[str] = []
    devices, findings = [], []
    for index in indices:
        sink = data.sinks[index] if index < len(data.sinks) else None
        trace = sink if isinstance(sink, DeviceTrace) else DeviceTrace()
        device, found = _device(f"cuda:{index}", trace, segment_state(by_device[index]),
                                top, notes)
        devices.append(device)
        findings.extend(found)
    if not devices:
        notes.append("the snapshot holds no segments and no trace entries: nothing was "
                     "allocated on any device while it was recorded")
    settings = data.top.get("allocator_settings")
    return _bounded(SnapshotReport(
        source=os.path.basename(os.fspath(path)), file_bytes=data.file_bytes,
        version=__version__, devices=tuple(devices),
        findings=tuple(sorted(findings, key=lambda f: -f.bytes)),
        allocator_settings={str(k)[:100]: _plain(v) for k, v in settings.items()}
        if type(settings) is dict else {},
        notes=tuple(notes), seconds=round(time.perf_counter() - started, 3)))


def _bounded(value: Any) -> Any:
    """``value`` with every number inside 64 bits (sums over a hostile file could pass
    them; a report is JSON that must be readable again)."""
    if type(value) is int:
        return max(min(value, _BOUND - 1), 1 - _BOUND)
    if type(value) is float:
        return max(min(value, 9e18), -9e18) if math.isfinite(value) else 0.0
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _bounded(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    if type(value) is tuple:
        return tuple(_bounded(v) for v in value)
    if type(value) is list:
        return [_bounded(v) for v in value]
    if type(value) is dict:
        return {k: _bounded(v) for k, v in value.items()}
    return value


def _plain(value: Any) -> Any:
    """A setting as JSON can hold it (numbers beyond 64 bits and NaN become text)."""
    if value is None or type(value) is bool:
        return value
    if type(value) is str:
        return value[:200]
    if type(value) is int:
        return value if -_BOUND <= value < _BOUND else str(value)[:40]
    if type(value) is float:
        return value if math.isfinite(value) and abs(value) < _BOUND else str(value)
    if type(value) is dict:
        return {str(k)[:100]: _plain(v) for k, v in list(value.items())[:64]}
    return str(value)[:200]


def _seconds(t: int | None, first: int | None) -> float | None:
    return None if t is None or first is None else round((t - first) / 1e6, 6)


def _device(name: str, trace: DeviceTrace, state: SegmentState, top: int,
            notes: list[str]) -> tuple[DeviceSnapshot, list[Finding]]:
    offset = state.requested - trace.allocated
    if offset + trace.low < 0:
        notes.append(f"{name}: the trace frees {format_bytes(-(offset + trace.low))} more "
                     "than the final segments and the trace allocate; the timeline starts "
                     "at zero instead")
        offset = -trace.low
    r_offset = max(state.reserved - trace.reserved, -trace.reserved_low)
    if trace.entries == 0:
        notes.append(f"{name}: no trace entries; record them with "
                     "torch.cuda.memory._record_memory_history() before the code to study. "
                     "Only the final segments were analysed")
    elif trace.unknown_freed:
        notes.append(f"{name}: the trace begins after some allocations were made (it frees "
                     f"{format_bytes(trace.unknown_freed)} it never saw allocated): recording "
                     "started late or the max_entries ring buffer wrapped")
    live = _live_at_peak(trace, state)
    peak = offset + trace.peak
    attributed = sum(size for size, _f, _b in live)
    sites = _sites(live, top)
    timeline, unit = _timeline(trace, offset, r_offset)
    flushes = trace.flushes
    frag = judge(as_stats(state, trace.oom_count, flushes.retry_runs), name)
    first = trace.first_time
    flush_sites = tuple(FlushSite(runs, flushes.site_bytes.get(site, 0), *site)
                        for site, runs in flushes.sites.most_common(5))
    ooms = tuple(OomEvent(_seconds(t, first), size, free if free >= 0 else None,
                          *split_frames(frames)[:2]) for t, size, free, frames in trace.ooms)
    device = DeviceSnapshot(
        device=name, entries=trace.entries, actions=dict(trace.actions),
        duration_s=_seconds(trace.last_time, first), peak_allocated=peak,
        peak_at_s=_seconds(trace.peak_time, first), peak_entry=trace.peak_entry,
        allocated_start=offset, allocated_end=state.requested, reserved_end=state.reserved,
        peak_reserved=max(r_offset + trace.reserved_high, state.reserved),
        timeline=timeline, timeline_unit=unit, live_at_peak=len(live),
        unattributed=max(peak - attributed, 0), top_at_peak=sites,
        segments=state.segments, blocks=state.blocks, largest_free_block=state.largest_free,
        fragmentation=frag, flush_runs=flushes.runs, bytes_returned=flushes.bytes_freed,
        bytes_rerequested=flushes.bytes_rerequested, flush_sites=flush_sites,
        empty_cache_runs=flushes.empty_cache_runs, empty_cache_bytes=flushes.empty_cache_bytes,
        ooms=trace.oom_count, oom_events=ooms, growth=_growth(timeline, unit))
    return device, _findings(device, state)


def _live_at_peak(trace: DeviceTrace, state: SegmentState) -> list[tuple[int, Any, bool]]:
    """(requested bytes, frames, made before the trace) of each allocation alive at the peak."""
    out = [(size, frames or (), False) for size, frames, n in trace.live.values()
           if n <= trace.peak_entry]
    out.extend((r.size, r.frames, r.before_trace) for r in trace.freed_after_peak)
    seen = trace.live
    out.extend((requested, frames, True) for addr, requested, frames in state.live
               if addr not in seen)
    return out


def _sites(live: list[tuple[int, Any, bool]], top: int) -> tuple[AllocationSite, ...]:
    """Group allocations by where they were made as the report shows it: the script's
    frames and the library frame that allocated (C++ frames vary with the kernel taken)."""
    split: dict[Any, tuple[Any, ...]] = {}
    groups: dict[tuple[Any, ...], list[Any]] = {}  # key -> bytes, count, largest, cpp, library
    for size, frames, before in live:
        parts = split.get(frames)
        if parts is None:
            parts = split[frames] = split_frames(frames)
        user, library, cpp = parts
        g = groups.setdefault((user, library[:1], before), [0, 0, 0, 0, library])
        g[0] += size
        g[1] += 1
        g[2] = max(g[2], size)
        g[3] = max(g[3], cpp)
    ranked = sorted(groups.items(), key=lambda kv: -kv[1][0])[:top]
    return tuple(AllocationSite(g[0], g[1], g[2], key[0], g[4], g[3], key[2])
                 for key, g in ranked)


def _timeline(trace: DeviceTrace, offset: int,
              r_offset: int) -> tuple[dict[str, list[float]], str]:
    buckets = trace.timeline()
    timed = trace.first_time is not None and all(b[1] is not None for b in buckets)
    first = trace.first_time or 0
    t = [round((b[1] - first) / 1e6, 6) if timed else float(b[0]) for b in buckets]
    return ({"t": t, "allocated": [float(offset + b[2]) for b in buckets],
             "allocated_low": [float(offset + b[3]) for b in buckets],
             "reserved": [float(r_offset + b[4]) for b in buckets]},
            "s" if timed else "entry")


def _growth(timeline: dict[str, list[float]], unit: str) -> TraceGrowth | None:
    """The lowest allocated level of successive windows: does it rise steadily?"""
    t, low = timeline["t"], timeline["allocated_low"]
    if len(t) < 2 * GROWTH_WINDOWS or t[-1] <= t[0]:
        return None
    span = (t[-1] - t[0]) / GROWTH_WINDOWS
    floors: dict[int, float] = {}
    for x, y in zip(t, low):
        w = min(int((x - t[0]) / span), GROWTH_WINDOWS - 1)
        floors[w] = min(floors.get(w, y), y)
    scale = 1.0 if unit == "s" else 1000.0
    label = "s" if unit == "s" else "1000 entries"
    points = sorted(floors.items())[max(1, len(floors) // 8):]  # skip the warm-up
    xs = [(t[0] + (w + 0.5) * span) / scale for w, _ in points]
    ys = [y for _, y in points]
    if len(points) < 8:
        return TraceGrowth("undecided", unit=label, windows=len(points),
                           reason=f"only {len(points)} windows with entries; need 8")
    fit = fit_line(xs, ys)
    total = int(round(fit.slope * (xs[-1] - xs[0])))
    late = theil_sen(xs[len(xs) // 2:], ys[len(ys) // 2:])

    def verdict(kind: str, reason: str) -> TraceGrowth:
        return TraceGrowth(kind, round(fit.slope, 1), label, round(fit.r2, 4), len(points),
                           total, reason)

    rate = f"{format_bytes(fit.slope)}/{label}"
    if total < GROWTH_FLOOR:
        return verdict("flat", f"the lowest allocated level changes by {format_bytes(total)} "
                               f"across the trace, below the {format_bytes(GROWTH_FLOOR)} floor")
    if late < 0.5 * fit.slope:
        return verdict("flat", f"the lowest allocated level rose early, then levelled off "
                               f"({format_bytes(late)}/{label} over the second half)")
    if total < 3 * fit.noise or fit.r2 < 0.6:
        return verdict("undecided", f"a rise of {rate} with a poor fit (R^2 {fit.r2:.2f}): "
                                    "memory rises in bursts, not steadily")
    return verdict("growing", f"the lowest allocated level rises by {rate} "
                              f"({format_bytes(total)} across the trace, R^2 {fit.r2:.2f})")


def _findings(d: DeviceSnapshot, state: SegmentState) -> list[Finding]:
    out = []
    frag = d.fragmentation
    if frag is not None and frag.inactive_split >= FRAGMENTED_FLOOR \
            and frag.ratio >= FRAGMENTED_RATIO:
        out.append(Finding(
            cause="fragmentation", title="allocator fragmentation", device=d.device,
            bytes=frag.inactive_split,
            culprit=Culprit(name="CUDA caching allocator", kind="unknown"),
            evidence=(f"{state.split_segments} of {d.segments} segments hold free pieces "
                      f"beside blocks in use: {format_bytes(frag.inactive_split)} "
                      f"({frag.ratio:.0%} of the {format_bytes(frag.reserved)} reserved) that "
                      "empty_cache() cannot return",
                      f"the largest free block is {format_bytes(d.largest_free_block)}: a "
                      "larger request needs a new segment"),
            data={"inactive_split": frag.inactive_split, "reserved": frag.reserved,
                  "split_segments": state.split_segments, "segments": d.segments,
                  "largest_free_block": d.largest_free_block},
            fix=frag.advice[0] if frag.advice else "", confidence="medium"))
    thrash = [s for s in d.flush_sites if s.empty_cache]
    runs = d.empty_cache_runs
    if runs >= THRASH_RUNS and d.bytes_rerequested and thrash:
        site = next((s for s in thrash if s.user_frames), thrash[0])
        where = site.user_frames[0] if site.user_frames else None
        culprit = Culprit(name="torch.cuda.empty_cache", kind="unknown",
                          file=where.filename if where else None,
                          line=where.line if where else None,
                          function=where.name if where else None)
        at = f" ({where.filename}:{where.line})" if where else ""
        out.append(Finding(
            cause="cache_thrash", title="allocator cache emptied again and again",
            device=d.device, bytes=d.bytes_rerequested, culprit=culprit,
            evidence=(f"torch.cuda.empty_cache() handed segments back to the driver {runs} "
                      f"times{at}, {format_bytes(d.empty_cache_bytes)} in all",
                      f"{format_bytes(d.bytes_rerequested)} was requested from the driver "
                      "again afterwards: each flush is refilled with slow cudaMalloc calls"),
            data={"empty_cache_runs": runs, "bytes_returned": d.bytes_returned,
                  "bytes_rerequested": d.bytes_rerequested},
            fix=f"remove torch.cuda.empty_cache() from the loop{at}: the caching allocator "
                "reuses freed blocks; emptying it forces cudaFree/cudaMalloc calls",
            confidence="high"))
    return out
