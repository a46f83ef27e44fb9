"""Readings for accelerators other than CUDA: XPU, MPS, and what ``torch.accelerator`` knows.

* XPU: ``torch.xpu.memory_stats_as_nested_dict`` (same counters as CUDA) and
  ``torch.xpu.mem_get_info``, only once this process has initialised XPU.
* MPS: ``torch.mps.current_allocated_memory`` (``allocated``) and
  ``driver_allocated_memory`` (``reserved``: what Metal holds for this process, cache
  included). MPS has no peak counter, no retry/OOM counters and no free/total figure.
* Any other device type (``privateuse1`` back-ends such as HPU/NPU): torch >= 2.9's
  ``torch.accelerator.memory_stats``, when the back-end implements it.

Known limitations:
    * MPS readings initialise the MPS back-end (cheap; there is no "not initialised"
      query for MPS).
"""

from __future__ import annotations

from typing import Any

import torch

from torchmem.collect.cuda import fields_from_flat, fields_from_nested

__all__ = ["xpu_fields", "mps_fields", "generic_fields", "is_initialized"]


def is_initialized(device_type: str) -> bool:
    """True when this process has initialised ``device_type`` (never initialises it)."""
    module = getattr(torch, device_type, None)
    check = getattr(module, "is_initialized", None)
    if check is None:
        return False
    try:
        return bool(check())
    except Exception:  # noqa: BLE001 - a back-end without a working query
        return False


def xpu_fields(index: int) -> dict[str, int | None]:
    """Allocator counters and driver free/total of ``xpu:index`` (zeros before init)."""
    xpu: Any = torch.xpu
    if not xpu.is_initialized():
        out = fields_from_nested({})
        out.update(free=None, total=None)
        return out
    out = fields_from_nested(xpu.memory_stats_as_nested_dict(index))
    try:
        free, total = xpu.mem_get_info(index)
        out.update(free=int(free), total=int(total))
    except (RuntimeError, AttributeError):
        out.update(free=None, total=None)
    return out


def mps_fields() -> dict[str, int | None]:
    """``allocated`` and ``reserved`` of the MPS device."""
    mps: Any = torch.mps
    return {
        "allocated": int(mps.current_allocated_memory()),
        "reserved": int(mps.driver_allocated_memory()),
    }


def generic_fields(device: str) -> dict[str, int | None]:
    """Counters of any device ``torch.accelerator.memory_stats`` supports, else ``{}``."""
    accel: Any = getattr(torch, "accelerator", None)
    stats_fn = getattr(accel, "memory_stats", None)
    if stats_fn is None:
        return {}
    try:
        stats = stats_fn(torch.device(device))
    except Exception:  # noqa: BLE001 - back-end without stats: no figures, not an error
        return {}
    return fields_from_flat(stats) if stats else {}
