"""``torchmem.fragmentation()``: is the CUDA caching allocator fragmented?

Reads ``torch.cuda.memory_stats(device)`` (or XPU's) once and hands it to the pure
judgement in :mod:`torchmem.analyze.fragmentation`, which explains the figures. On a
device without a caching allocator (CPU, MPS) it returns a "not applicable" record,
not an error. It never initialises CUDA: before the first CUDA allocation the verdict
is "ok, nothing allocated".
"""

from __future__ import annotations

from typing import Any

import torch

from torchmem.analyze.fragmentation import judge, not_applicable
from torchmem.collect.readings import DeviceLike, resolve_device
from torchmem.model.readings import Fragmentation

__all__ = ["fragmentation"]


def fragmentation(device: DeviceLike = None) -> Fragmentation:
    """Judge the caching allocator of ``device`` now.

    Args:
        device: device to judge; ``None`` is the current accelerator if initialised,
            else the CPU (which gives the "not applicable" record).

    Returns:
        A :class:`~torchmem.model.readings.Fragmentation` record: figures, verdict
        (``"not_applicable"``, ``"ok"``, ``"cached"``, ``"fragmented"``,
        ``"pressure"``), explanation and advice.

    Raises:
        DeviceError: the device is unknown or not available.

    Example:
        >>> report = torchmem.fragmentation("cuda:0")     # doctest: +SKIP
        >>> report.verdict, report.explanation             # doctest: +SKIP
    """
    name = resolve_device(device)
    kind = name.split(":", 1)[0]
    if kind == "cpu":
        return not_applicable(
            name, "CPU tensors are allocated with malloc and freed at once; compare "
            "rss with heap (torchmem.read) to see memory glibc keeps after frees.",
        )
    if kind == "mps":
        return not_applicable(name, "torch exposes no block-level statistics for MPS.")
    module: Any = torch.cuda if kind == "cuda" else getattr(torch, kind, None)
    stats_fn = getattr(module, "memory_stats", None)
    initialized = getattr(module, "is_initialized", None)
    if stats_fn is None:
        return not_applicable(name, f"torch.{kind} offers no allocator statistics.")
    if initialized is not None and not initialized():
        return judge({}, name)
    return judge(stats_fn(int(name.split(":")[1])), name)
