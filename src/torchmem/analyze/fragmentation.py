"""Judge a caching allocator's state from its statistics (pure; no torch).

Input: the flat dict of ``torch.cuda.memory_stats()`` (XPU's is the same shape). The
keys read are documented by PyTorch:

=================================  ==================================================
``allocated_bytes.all.current``    bytes in blocks handed to live tensors
``reserved_bytes.all.current``     bytes of segments held from the driver
``active_bytes.all.current``       bytes in active blocks (allocated, or freed but
                                   still in use by a stream)
``inactive_split_bytes.all.current``  bytes of free blocks inside segments that also
                                   hold active blocks (split segments)
``num_alloc_retries``              times a driver allocation failed, the cache was
                                   flushed and the allocation retried
``num_ooms``                       out-of-memory errors raised
=================================  ==================================================

How to read them: ``reserved - active`` is memory the allocator holds but no tensor
uses. Of that, whole free segments (``releasable``) go back to the driver with
``torch.cuda.empty_cache()`` and are reused by the next allocations anyway: a large
cache is not a problem. ``inactive_split`` is different: free pieces of segments that
are partly in use. ``empty_cache()`` cannot return them, and a request larger than each
piece needs a new segment even though the total free is enough. *That* is
fragmentation. (The rule of thumb "reserved > 1.5 x allocated means fragmentation"
confuses the two.)
"""

from __future__ import annotations

from typing import Mapping

from torchmem.model.readings import Fragmentation
from torchmem.units import MiB, format_bytes

__all__ = ["judge", "not_applicable", "FRAGMENTED_RATIO", "FRAGMENTED_FLOOR", "CACHED_RATIO",
           "CACHED_FLOOR"]

#: inactive-split share of reserved memory from which a state is called fragmented
FRAGMENTED_RATIO = 0.20
#: ...and the least inactive-split bytes (small absolute waste is not worth a verdict)
FRAGMENTED_FLOOR = 64 * MiB
#: releasable share of reserved memory from which the cache is worth mentioning
CACHED_RATIO = 0.50
#: ...and the least releasable bytes
CACHED_FLOOR = 256 * MiB

_ADVICE_FRAGMENTED = (
    "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before the first CUDA "
    "allocation: segments then grow in place instead of being split.",
    "Keep tensor shapes stable from step to step (pad variable-length batches to a few "
    "bucket sizes), so freed blocks fit the next requests.",
    "Allocate long-lived buffers (weights, optimizer state, reused workspaces) before "
    "the first training step, so short-lived tensors do not split their segments.",
    "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N> stops the allocator from splitting "
    "blocks larger than N MiB.",
    "torch.cuda.empty_cache() does not help here: split segments cannot be returned.",
)
_ADVICE_CACHED = (
    "Nothing to fix: the cached segments are reused by the next allocations. Call "
    "torch.cuda.empty_cache() only to hand the memory to another process.",
)
_ADVICE_PRESSURE = (
    "Lower the peak (smaller batch, activation checkpointing, freeing references "
    "before backward); see `torchmem run` for what holds memory.",
    "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce the waste that "
    "makes retries happen.",
)


def _int(stats: Mapping[str, object], key: str) -> int:
    value = stats.get(key, 0)
    return int(value) if isinstance(value, (int, float)) else 0


def not_applicable(device: str, why: str) -> Fragmentation:
    """The record for a device without a caching allocator (CPU, MPS)."""
    return Fragmentation(
        device=device,
        applicable=False,
        verdict="not_applicable",
        explanation=f"Fragmentation of a caching allocator does not apply to {device}: {why}",
    )


def judge(stats: Mapping[str, object], device: str = "cuda:0") -> Fragmentation:
    """Judge fragmentation from a flat ``memory_stats()`` dict.

    Args:
        stats: ``torch.cuda.memory_stats(device)`` (flat keys, see the module docstring);
            missing keys count as 0, so an empty dict (allocator unused) is "ok".
        device: the device the stats belong to (for the record).

    Returns:
        A :class:`~torchmem.model.readings.Fragmentation` with the figures, a verdict
        (``"ok"``, ``"cached"``, ``"fragmented"`` or ``"pressure"``), an explanation
        and advice.

    Example:
        >>> judge({"reserved_bytes.all.current": 2**30,
        ...        "allocated_bytes.all.current": 2**29,
        ...        "active_bytes.all.current": 2**29,
        ...        "inactive_split_bytes.all.current": 2**29}).verdict
        'fragmented'
    """
    allocated = _int(stats, "allocated_bytes.all.current")
    reserved = _int(stats, "reserved_bytes.all.current")
    active = _int(stats, "active_bytes.all.current") or allocated
    split = _int(stats, "inactive_split_bytes.all.current")
    retries = _int(stats, "num_alloc_retries")
    ooms = _int(stats, "num_ooms")
    releasable = max(reserved - active - split, 0)
    ratio = split / reserved if reserved else 0.0
    figures = (
        f"{format_bytes(reserved)} reserved, {format_bytes(allocated)} allocated, "
        f"{format_bytes(split)} in split free blocks ({ratio:.0%} of reserved), "
        f"{format_bytes(releasable)} in wholly free segments."
    )
    fragmented = split >= FRAGMENTED_FLOOR and ratio >= FRAGMENTED_RATIO
    advice: tuple[str, ...] = ()
    if ooms or retries:
        verdict = "pressure"
        explanation = (
            f"The allocator ran out of memory: {retries} allocation(s) had to flush the "
            f"cache and retry (each retry synchronises the device and is slow), and "
            f"{ooms} out-of-memory error(s) were raised. {figures}"
        )
        advice = _ADVICE_PRESSURE + (_ADVICE_FRAGMENTED[:2] if fragmented else ())
    elif fragmented:
        verdict = "fragmented"
        explanation = (
            f"Memory is fragmented: {format_bytes(split)} sits in free pieces of partly "
            f"used segments. A request larger than each piece needs a new segment even "
            f"though the total free is enough, and empty_cache() cannot return it. "
            f"{figures}"
        )
        advice = _ADVICE_FRAGMENTED
    elif releasable >= CACHED_FLOOR and reserved and releasable / reserved >= CACHED_RATIO:
        verdict = "cached"
        explanation = (
            f"The allocator caches {format_bytes(releasable)} in free segments, left from "
            f"an earlier, higher peak. This is the cache working, not fragmentation: the "
            f"next allocations reuse it. {figures}"
        )
        advice = _ADVICE_CACHED
    else:
        verdict = "ok"
        explanation = (
            "Nothing allocated on this device yet." if not reserved
            else f"No fragmentation worth acting on. {figures}"
        )
    return Fragmentation(
        device=device,
        applicable=True,
        verdict=verdict,
        explanation=explanation,
        allocated=allocated,
        reserved=reserved,
        active=active,
        inactive_split=split,
        releasable=releasable,
        ratio=ratio,
        alloc_retries=retries,
        num_ooms=ooms,
        advice=advice,
    )
