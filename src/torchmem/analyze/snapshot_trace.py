"""Follow one device's allocator trace entry by entry, in bounded memory (pure; no torch).

A :class:`DeviceTrace` is the sink :func:`torchmem.model.snapshot_pickle.read_snapshot`
hands each trace entry of one device to. It keeps:

* the bytes allocated and reserved, relative to the start of the trace (``alloc`` adds
  the requested size, ``free_completed`` takes it away; ``segment_alloc``/``segment_map``
  add to reserved, ``segment_free``/``segment_unmap`` take away), and their extremes;
* the allocations alive at the highest point (the peak): every allocation still alive,
  plus those alive at the peak that were freed after it;
* a timeline of at most :data:`TIMELINE_POINTS` buckets (highest and lowest allocated,
  highest reserved per bucket; the bucket width doubles whenever the buckets fill up);
* the segments returned to the driver (runs of ``segment_free``: ``empty_cache()`` or a
  flush-and-retry before an allocation), where from, and the bytes requested again after;
* the out-of-memory entries.

The trace starts where recording started (or where the ring buffer of ``max_entries``
wrapped): allocations made before it show up as frees of unknown addresses, or as blocks
of the final segments that the trace never allocated. :meth:`DeviceTrace.finish` puts
them back with the final state, so the figures are absolute.

Cost: about 1 µs per entry; memory: one tuple per live allocation, one per allocation
alive at the peak and freed since, and the fixed-size timeline.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from torchmem.analyze.snapshot_state import split_frames

__all__ = ["DeviceTrace", "TIMELINE_POINTS", "Flushes", "LiveAtPeak", "flush_site"]

#: Most buckets of the timeline (each holds a highest and lowest value).
TIMELINE_POINTS = 512
#: Most out-of-memory entries kept (all are counted).
MAX_OOMS = 20
#: Most distinct flush sites kept (all flushes are counted).
MAX_SITES = 64


def flush_site(frames: tuple[Any, ...]) -> tuple[Any, ...]:
    """``(empty_cache?, user frames, library frames)`` of a flush's stack: whether the
    stack shows ``torch.cuda.empty_cache()``, and where from."""
    user, library, _cpp = split_frames(frames)
    return (any(f[2] == "empty_cache" for f in frames), user, library)


@dataclass
class Flushes:
    """Segments handed back to the driver during the trace."""

    runs: int = 0  # maximal runs of segment_free/unmap entries
    segments_freed: int = 0
    bytes_freed: int = 0
    segments_allocated: int = 0
    bytes_allocated: int = 0
    bytes_rerequested: int = 0  # segment bytes requested again after some were freed
    empty_cache_runs: int = 0  # runs whose stack shows torch.cuda.empty_cache()
    empty_cache_bytes: int = 0
    retry_runs: int = 0  # runs with a stack without it: a flush before retrying a cudaMalloc
    # (empty_cache?, user frames, library frames) -> runs, and -> bytes
    sites: Counter[tuple[Any, ...]] = field(default_factory=Counter)
    site_bytes: Counter[tuple[Any, ...]] = field(default_factory=Counter)


@dataclass
class LiveAtPeak:
    """One allocation alive at the peak: bytes, stack, and whether the trace saw it made."""

    size: int
    frames: tuple[Any, ...]
    before_trace: bool


class DeviceTrace:
    """The :class:`~torchmem.model.snapshot_pickle.TraceSink` of one device's trace."""

    def __init__(self) -> None:
        self.entries = 0
        self.actions: Counter[str] = Counter()
        self.allocated = 0  # relative to the start of the trace
        self.reserved = 0
        self.low = 0
        self.peak = 0
        self.peak_entry = 0  # entries read when the peak was reached (0: at the start)
        self.peak_time: int | None = None
        self.reserved_high = 0
        self.reserved_low = 0
        self.first_time: int | None = None
        self.last_time: int | None = None
        self.live: dict[int, tuple[int, Any, int]] = {}  # addr -> size, frames, entry
        self.freed_after_peak: list[LiveAtPeak] = []
        self.unknown_freed = 0  # bytes freed that the trace never saw allocated
        self.ooms: list[tuple[int | None, int, int, Any]] = []  # time, size, free, frames
        self.oom_count = 0
        self.flushes = Flushes()
        self._in_flush = False
        self._site: tuple[Any, ...] = (False, (), ())
        # timeline: closed buckets [first entry, time, high, low, reserved high]
        self.buckets: list[list[Any]] = []
        self.width = 1
        self._open: list[Any] | None = None

    def add(self, action: str, addr: int | None, size: int | None, stream: int | None,
            time_us: int | None, frames: tuple[Any, ...] | None) -> None:
        """One trace entry (see :class:`~torchmem.model.snapshot_pickle.TraceSink`)."""
        n = self.entries = self.entries + 1
        if time_us is not None:
            if self.first_time is None:
                self.first_time = time_us
            self.last_time = time_us
        if size is None or size < 0:
            size = 0
        if action == "alloc":
            allocated = self.allocated = self.allocated + size
            self.live[addr] = (size, frames, n)  # type: ignore[index]
            if allocated > self.peak:
                self.peak, self.peak_entry, self.peak_time = allocated, n, time_us
                if self.freed_after_peak:
                    self.freed_after_peak = []
            self._in_flush = False
        elif action == "free_completed":
            allocated = self.allocated = self.allocated - size
            record = self.live.pop(addr, None)  # type: ignore[arg-type]
            if record is None:
                self.unknown_freed += size
                if self.peak_entry < n:  # made before the trace, alive at the peak
                    self.freed_after_peak.append(LiveAtPeak(size, frames or (), True))
            elif record[2] <= self.peak_entry:
                self.freed_after_peak.append(LiveAtPeak(record[0], record[1] or (), False))
            if allocated < self.low:
                self.low = allocated
            self._in_flush = False
        elif action == "free_requested":
            self._in_flush = False
        else:
            self._other(action, addr, size, time_us, frames)
        self.actions[action] += 1
        # the timeline: this entry into the open bucket (inline: it runs for every entry)
        bucket = self._open
        if bucket is None:
            self._open = [n, time_us, self.allocated, self.allocated, self.reserved]
            return
        allocated = self.allocated
        if allocated > bucket[2]:
            bucket[2] = allocated
        elif allocated < bucket[3]:
            bucket[3] = allocated
        if self.reserved > bucket[4]:
            bucket[4] = self.reserved
        if n - bucket[0] + 1 >= self.width:
            self.buckets.append(bucket)
            self._open = None
            if len(self.buckets) >= 2 * TIMELINE_POINTS:
                self._halve()

    def _other(self, action: str, addr: int | None, size: int, time_us: int | None,
               frames: tuple[Any, ...] | None) -> None:
        flushes = self.flushes
        if action in ("segment_alloc", "segment_map"):
            self.reserved += size
            self.reserved_high = max(self.reserved_high, self.reserved)
            flushes.segments_allocated += 1
            flushes.bytes_allocated += size
            owed = flushes.bytes_freed - flushes.bytes_rerequested
            if owed > 0:
                flushes.bytes_rerequested += min(owed, size)
            self._in_flush = False
        elif action in ("segment_free", "segment_unmap"):
            self.reserved -= size
            self.reserved_low = min(self.reserved_low, self.reserved)
            flushes.segments_freed += 1
            flushes.bytes_freed += size
            if not self._in_flush:
                self._in_flush = True
                flushes.runs += 1
                self._site = site = flush_site(frames or ())
                if site[0]:
                    flushes.empty_cache_runs += 1
                elif frames:
                    flushes.retry_runs += 1
                if site in flushes.sites or len(flushes.sites) < MAX_SITES:
                    flushes.sites[site] += 1
            site = self._site
            if site[0]:
                flushes.empty_cache_bytes += size
            if site in flushes.site_bytes or len(flushes.site_bytes) < MAX_SITES:
                flushes.site_bytes[site] += size
        elif action == "oom":
            self.oom_count += 1
            if len(self.ooms) < MAX_OOMS:  # addr is device_free for an oom entry
                self.ooms.append((time_us, size, addr if addr is not None else -1,
                                  frames or ()))
            self._in_flush = False
        elif action != "snapshot":
            self._in_flush = False

    def _halve(self) -> None:
        merged = []
        b = self.buckets
        for i in range(0, len(b) - 1, 2):
            x, y = b[i], b[i + 1]
            merged.append([x[0], x[1], max(x[2], y[2]), min(x[3], y[3]), max(x[4], y[4])])
        if len(b) % 2:
            merged.append(b[-1])
        self.buckets = merged
        self.width *= 2

    def timeline(self) -> list[list[Any]]:
        """The buckets (``[first entry, time_us, high, low, reserved high]``, relative
        bytes), the open one included."""
        return self.buckets + ([self._open] if self._open is not None else [])
