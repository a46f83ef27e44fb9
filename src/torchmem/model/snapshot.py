"""What ``torchmem report`` finds in a CUDA memory snapshot, as plain data (no torch).

A snapshot written by ``torch.cuda.memory._dump_snapshot`` is read by
:mod:`torchmem.model.snapshot_pickle` and analysed by :mod:`torchmem.analyze.snapshot`
into a :class:`SnapshotReport`: per device, the allocated and reserved timeline over the
trace, the peak and the allocations alive at it (grouped by stack, the script's frames
first), the state of the segments at the end with a fragmentation verdict, what the
cache gave back to the driver, the out-of-memory events, a growth verdict across the
trace, and findings that carry their evidence and fix like a capture's. Every record is
frozen and round-trips through JSON (``to_dict()``/``from_dict()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchmem.model._serde import Record
from torchmem.model.capture import Finding
from torchmem.model.readings import Fragmentation

__all__ = ["Frame", "AllocationSite", "FlushSite", "OomEvent", "TraceGrowth",
           "DeviceSnapshot", "SnapshotReport", "SNAPSHOT_REPORT_VERSION"]

#: Version of :meth:`SnapshotReport.to_dict`'s layout.
SNAPSHOT_REPORT_VERSION = 1


@dataclass(frozen=True)
class Frame(Record):
    """One frame of a recorded stack."""

    filename: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.line} {self.name}"


@dataclass(frozen=True)
class AllocationSite(Record):
    """Allocations alive at the peak that share one stack.

    Attributes:
        bytes: their requested bytes together.
        count: how many.
        largest: the largest one.
        user_frames: the frames of the script (outside torch, site-packages, the standard
            library and C++), innermost first; empty when the stack has none.
        library_frames: the other Python frames, innermost first (the op that allocated
            is the first), at most a few.
        cpp_frames: how many C++ frames the stack also had.
        before_trace: allocated before the trace began (seen in the final segments or
            freed during the trace), so the stack is the block's or the free's.
    """

    bytes: int
    count: int
    largest: int
    user_frames: tuple[Frame, ...] = ()
    library_frames: tuple[Frame, ...] = ()
    cpp_frames: int = 0
    before_trace: bool = False


@dataclass(frozen=True)
class FlushSite(Record):
    """Where segments were handed back to the driver from (a run of ``segment_free``).

    Attributes:
        runs: flushes from this stack.
        bytes: segment bytes they returned.
        empty_cache: the stack shows ``torch.cuda.empty_cache()``; otherwise the allocator
            flushed its cache to retry a failed ``cudaMalloc``.
        user_frames: as in :class:`AllocationSite`.
        library_frames: as in :class:`AllocationSite`.
    """

    runs: int
    bytes: int
    empty_cache: bool
    user_frames: tuple[Frame, ...] = ()
    library_frames: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class OomEvent(Record):
    """An ``oom`` trace entry: the allocator raised out of memory."""

    time_s: float | None
    requested: int
    device_free: int | None
    user_frames: tuple[Frame, ...] = ()
    library_frames: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class TraceGrowth(Record):
    """Whether the lowest allocated level rises across the trace.

    Attributes:
        verdict: ``growing``, ``flat`` or ``undecided``.
        bytes_per_unit: the fitted rise per second (or per 1000 entries without times).
        unit: ``"s"`` or ``"1000 entries"``.
        r2: goodness of the fit of the windows' lowest levels.
        windows: how many windows the trace was cut into.
        total: bytes gained across the analysed windows.
        reason: one sentence saying why.
    """

    verdict: str
    bytes_per_unit: float = 0.0
    unit: str = "s"
    r2: float = 0.0
    windows: int = 0
    total: int = 0
    reason: str = ""


@dataclass(frozen=True)
class DeviceSnapshot(Record):
    """One device of a snapshot.

    Attributes:
        device: ``"cuda:N"``.
        entries: trace entries recorded for it (0 when history was not recorded).
        actions: entries per action (``alloc``, ``free_completed``, ``segment_free``...).
        duration_s: seconds the trace covers (None without ``time_us``).
        peak_allocated: highest requested bytes alive over the trace (the final state
            when there is no trace).
        peak_at_s: seconds into the trace of the peak (None without times).
        peak_entry: entries read when the peak was reached (0: before the first).
        allocated_start: requested bytes alive when the trace began.
        allocated_end: requested bytes alive in the final segments.
        reserved_end: bytes of the final segments.
        peak_reserved: highest reserved over the trace.
        timeline: ``{"t": [...], "allocated": [...], "allocated_low": [...],
            "reserved": [...]}``: per bucket of the trace, its start and its highest
            (and lowest) values.
        timeline_unit: what ``t`` counts: ``"s"`` or ``"entry"``.
        live_at_peak: allocations alive at the peak.
        unattributed: bytes at the peak that no allocation accounts for (a trace that
            disagrees with the segments); 0 when they agree.
        top_at_peak: the largest groups of allocations alive at the peak.
        segments: segments at the end.
        blocks: blocks at the end.
        largest_free_block: the largest free block inside a segment at the end.
        fragmentation: the allocator verdict on the final segments.
        flush_runs: times the cache handed segments back to the driver.
        empty_cache_runs: those whose stack shows ``torch.cuda.empty_cache()``.
        empty_cache_bytes: segment bytes they handed back.
        bytes_returned: segment bytes handed back.
        bytes_rerequested: segment bytes requested from the driver again afterwards.
        flush_sites: where the flushes came from.
        ooms: ``oom`` entries.
        oom_events: the first few of them.
        growth: the verdict across the trace (None without enough of a trace).
    """

    device: str
    entries: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    duration_s: float | None = None
    peak_allocated: int = 0
    peak_at_s: float | None = None
    peak_entry: int = 0
    allocated_start: int = 0
    allocated_end: int = 0
    reserved_end: int = 0
    peak_reserved: int = 0
    timeline: dict[str, list[float]] = field(default_factory=dict)
    timeline_unit: str = "s"
    live_at_peak: int = 0
    unattributed: int = 0
    top_at_peak: tuple[AllocationSite, ...] = ()
    segments: int = 0
    blocks: int = 0
    largest_free_block: int = 0
    fragmentation: Fragmentation | None = None
    flush_runs: int = 0
    empty_cache_runs: int = 0
    empty_cache_bytes: int = 0
    bytes_returned: int = 0
    bytes_rerequested: int = 0
    flush_sites: tuple[FlushSite, ...] = ()
    ooms: int = 0
    oom_events: tuple[OomEvent, ...] = ()
    growth: TraceGrowth | None = None


@dataclass(frozen=True)
class SnapshotReport(Record):
    """Everything ``torchmem report`` found in one snapshot file.

    Attributes:
        source: the file's name.
        file_bytes: its size.
        version: the torchmem version that analysed it.
        format_version: :data:`SNAPSHOT_REPORT_VERSION`.
        devices: one record per device with segments or trace entries.
        findings: causes found, largest first (``fragmentation``, ``cache_thrash``).
        allocator_settings: the allocator configuration the snapshot recorded.
        notes: extra sentences (what the trace does not cover, disagreements).
        seconds: how long the analysis took.
    """

    source: str
    file_bytes: int
    version: str
    format_version: int = SNAPSHOT_REPORT_VERSION
    devices: tuple[DeviceSnapshot, ...] = ()
    findings: tuple[Finding, ...] = ()
    allocator_settings: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
