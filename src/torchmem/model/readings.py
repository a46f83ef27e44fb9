"""Memory readings and the records measured from them (no torch).

A :class:`Reading` is what :func:`torchmem.read` returns for one device at one moment.
Every numeric field is ``Optional[int]`` bytes (or a count): ``None`` means "this device
or this torch build does not offer that figure", never "zero".

The other records here are built from readings: :class:`Mark` and :class:`TrackResult`
(:class:`torchmem.Tracker`), :class:`ModeComparison` (:func:`torchmem.compare_modes`) and
:class:`Fragmentation` (:func:`torchmem.fragmentation`). All are frozen and round-trip
through JSON with ``to_dict()``/``from_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchmem.model._serde import Record
from torchmem.units import format_bytes, format_delta

__all__ = [
    "Reading",
    "Mark",
    "TrackResult",
    "ModeRow",
    "ModeComparison",
    "Fragmentation",
    "READING_FIELDS",
]

#: fields of a :class:`Reading` that count events, not bytes
_COUNT_FIELDS: tuple[str, ...] = ("alloc_retries", "num_ooms")

#: the numeric fields of a :class:`Reading`, in display order
READING_FIELDS: tuple[str, ...] = (
    "allocated",
    "reserved",
    "active",
    "inactive_split",
    "peak_allocated",
    "peak_reserved",
    "alloc_retries",
    "num_ooms",
    "free",
    "total",
    "rss",
    "heap",
    "tensor_bytes",
)


@dataclass(frozen=True)
class Reading(Record):
    """Memory figures of one device at one moment.

    Attributes:
        device: normalised device string (``"cpu"``, ``"cuda:0"``, ``"mps"``, ``"xpu:0"``).
        time: ``time.time()`` when the reading was taken.
        allocated: bytes of live tensor blocks in the device allocator (CUDA/XPU:
            ``allocated_bytes.all.current``; MPS: ``current_allocated_memory``).
        reserved: bytes the caching allocator holds from the driver (allocated + cached).
        active: bytes of active blocks (allocated, plus freed blocks still in use by a stream).
        inactive_split: bytes of free blocks inside partly used segments; the
            fragmentation that ``empty_cache()`` cannot return.
        peak_allocated: highest ``allocated`` since the last peak reset.
        peak_reserved: highest ``reserved`` since the last peak reset.
        alloc_retries: times a device allocation failed and the cache was flushed to retry.
        num_ooms: out-of-memory errors the allocator raised.
        free: free device memory according to the driver (``mem_get_info``).
        total: total device memory according to the driver.
        rss: resident set size of this process (host memory, every device).
        heap: bytes in use in the C heap (glibc ``mallinfo2``: ``uordblks + hblkhd``);
            CPU tensors live there. ``None`` off glibc.
        tensor_bytes: exact bytes of unique live tensor storages on this device,
            including tensors only autograd holds. Only measured with ``exact=True``.
    """

    device: str
    time: float
    allocated: int | None = None
    reserved: int | None = None
    active: int | None = None
    inactive_split: int | None = None
    peak_allocated: int | None = None
    peak_reserved: int | None = None
    alloc_retries: int | None = None
    num_ooms: int | None = None
    free: int | None = None
    total: int | None = None
    rss: int | None = None
    heap: int | None = None
    tensor_bytes: int | None = None

    @property
    def device_type(self) -> str:
        """``"cuda"`` for ``"cuda:0"``, ``"cpu"`` for ``"cpu"``."""
        return self.device.split(":", 1)[0]

    @property
    def used(self) -> int | None:
        """The primary "bytes in use" figure for this device.

        Accelerators: ``allocated``. CPU: ``tensor_bytes`` when measured, else ``heap``,
        else ``rss``.
        """
        if self.device_type != "cpu" and self.allocated is not None:
            return self.allocated
        for value in (self.tensor_bytes, self.heap, self.rss):
            if value is not None:
                return value
        return self.allocated

    @property
    def used_source(self) -> str:
        """Name of the field :attr:`used` comes from (``"allocated"``, ``"heap"``...)."""
        if self.device_type != "cpu" and self.allocated is not None:
            return "allocated"
        for name in ("tensor_bytes", "heap", "rss"):
            if getattr(self, name) is not None:
                return name
        return "allocated"

    def figures(self) -> dict[str, int]:
        """The fields this reading has a value for, in display order."""
        out: dict[str, int] = {}
        for name in READING_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def diff(self, before: Reading) -> dict[str, int]:
        """Field-by-field ``self - before`` for the fields both readings have."""
        out: dict[str, int] = {}
        for name in READING_FIELDS:
            a, b = getattr(self, name), getattr(before, name)
            if a is not None and b is not None:
                out[name] = a - b
        return out

    def __repr__(self) -> str:
        parts = []
        for name, value in self.figures().items():
            if name in _COUNT_FIELDS:
                if value:  # a retry or an OOM is news; zero is not
                    parts.append(f"{name} {value}")
            else:
                parts.append(f"{name} {format_bytes(value)}")
        return f"Reading({self.device}: {', '.join(parts) if parts else 'no figures'})"


@dataclass(frozen=True)
class Mark(Record):
    """A named point inside a :class:`torchmem.Tracker` region.

    Attributes:
        name: the label given to ``Tracker.mark``.
        reading: the device reading at the mark.
        delta: net bytes since the region began (same source as ``Tracker.delta``).
        peak_delta: highest bytes above the region baseline reached during this phase,
            i.e. since the previous mark (or the start of the region).
    """

    name: str
    reading: Reading
    delta: int
    peak_delta: int

    @property
    def time(self) -> float:
        return self.reading.time

    def __repr__(self) -> str:
        return (f"Mark({self.name!r}: delta {format_delta(self.delta)}, "
                f"peak {format_delta(self.peak_delta)})")


@dataclass(frozen=True)
class TrackResult(Record):
    """What a finished :class:`torchmem.Tracker` region measured (JSON-ready).

    Attributes:
        device: the device tracked.
        source: where delta/peak come from: ``"allocator"`` (CUDA/XPU counters) or
            ``"engine"`` (torchmem's storage engine: tensors allocated in the region).
        baseline: reading at the start of the region.
        end: reading at the end of the region.
        delta: net bytes still alive at the end that the region added.
        peak_delta: highest bytes above the baseline reached inside the region.
        peak: absolute peak: ``baseline`` figure + ``peak_delta`` (engine), or the
            allocator's peak (allocator).
        marks: the named phases, in order.
    """

    device: str
    source: str
    baseline: Reading
    end: Reading
    delta: int
    peak_delta: int
    peak: int
    marks: tuple[Mark, ...] = ()

    def __repr__(self) -> str:
        marks = f", marks {[m.name for m in self.marks]}" if self.marks else ""
        return (
            f"TrackResult({self.device} ({self.source}): delta {format_delta(self.delta)}, "
            f"peak {format_delta(self.peak_delta)} above the baseline "
            f"({format_bytes(self.peak)}){marks})"
        )


@dataclass(frozen=True)
class ModeRow(Record):
    """One forward pass measured under one grad mode.

    Attributes:
        mode: ``"grad"`` (plain forward), ``"no_grad"`` or ``"inference_mode"``.
        peak_delta: highest bytes above the baseline during the forward.
        retained: bytes still alive after the forward while its outputs are held
            (outputs + what autograd saved for backward).
        saved: bytes of tensors saved for backward reachable from the outputs' graph.
        output_bytes: bytes of the outputs' own storages.
        seconds: wall time of the forward.
    """

    mode: str
    peak_delta: int
    retained: int
    saved: int
    output_bytes: int
    seconds: float


@dataclass(frozen=True)
class ModeComparison(Record):
    """Forward-pass memory under plain, ``no_grad`` and ``inference_mode`` (measured).

    Attributes:
        device: device measured.
        source: ``"allocator"`` or ``"engine"`` (see :class:`TrackResult`).
        rows: one row per mode, plain forward first.
        explanation: what the difference is and where it comes from.
    """

    device: str
    source: str
    rows: tuple[ModeRow, ...]
    explanation: str

    def row(self, mode: str) -> ModeRow:
        """The row of ``mode`` (``"grad"``, ``"no_grad"``, ``"inference_mode"``)."""
        for r in self.rows:
            if r.mode == mode:
                return r
        raise KeyError(mode)


@dataclass(frozen=True)
class Fragmentation(Record):
    """A judgement of the caching allocator's state (see :func:`torchmem.fragmentation`).

    Attributes:
        device: device judged.
        applicable: False on devices without a caching allocator (CPU, MPS).
        verdict: ``"not_applicable"``, ``"ok"``, ``"cached"`` (much free cache that
            ``empty_cache()`` could return), ``"fragmented"`` (much memory in split
            free blocks that ``empty_cache()`` cannot return) or ``"pressure"`` (the
            allocator already had to flush its cache and retry, or raised OOM).
        allocated: bytes in live tensor blocks.
        reserved: bytes held from the driver.
        active: bytes in active blocks.
        inactive_split: bytes of free blocks inside partly used segments.
        releasable: bytes in wholly free segments (what ``empty_cache()`` returns).
        ratio: ``inactive_split / reserved`` (0.0 when nothing is reserved).
        alloc_retries: cache flush-and-retry count.
        num_ooms: OOM count.
        explanation: plain-language reading of the figures.
        advice: what to do, most useful first (empty when nothing is needed).
    """

    device: str
    applicable: bool
    verdict: str
    explanation: str
    allocated: int = 0
    reserved: int = 0
    active: int = 0
    inactive_split: int = 0
    releasable: int = 0
    ratio: float = 0.0
    alloc_retries: int = 0
    num_ooms: int = 0
    advice: tuple[str, ...] = ()
