"""CUDA readings from the caching allocator's counters, without initialising CUDA.

One reading makes one call to ``torch.cuda.memory_stats_as_nested_dict`` (about
20-60 us: the allocator copies its counters under a lock) and, once CUDA is initialised,
one ``torch.cuda.mem_get_info`` (a driver call, a few microseconds). When this process
has not initialised CUDA, the allocator has allocated nothing: the counters read zero and
``free``/``total`` stay ``None`` because asking the driver would create a CUDA context
(hundreds of MiB of device memory and seconds of start-up) behind the user's back.

The same counters exist for XPU (``torch.xpu``) and, on torch >= 2.9, for any device
``torch.accelerator.memory_stats`` knows; :mod:`torchmem.collect.accelerator` uses
:func:`fields_from_nested` for those.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

__all__ = ["fields_from_nested", "fields_from_flat", "cuda_fields", "peak_counter"]


def _get(stats: Mapping[str, Any], *path: str) -> int | None:
    node: Any = stats
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return int(node) if isinstance(node, (int, float)) else None


def fields_from_nested(stats: Mapping[str, Any]) -> dict[str, int | None]:
    """Reading fields from a nested allocator-stats dict (``memory_stats_as_nested_dict``).

    Missing keys give ``None``; an empty dict (allocator never used) gives zeros for the
    byte counters and ``None`` for the rest.
    """
    if not stats:
        return {
            "allocated": 0, "reserved": 0, "active": 0, "inactive_split": 0,
            "peak_allocated": 0, "peak_reserved": 0, "alloc_retries": 0, "num_ooms": 0,
        }
    return {
        "allocated": _get(stats, "allocated_bytes", "all", "current"),
        "reserved": _get(stats, "reserved_bytes", "all", "current"),
        "active": _get(stats, "active_bytes", "all", "current"),
        "inactive_split": _get(stats, "inactive_split_bytes", "all", "current"),
        "peak_allocated": _get(stats, "allocated_bytes", "all", "peak"),
        "peak_reserved": _get(stats, "reserved_bytes", "all", "peak"),
        "alloc_retries": _get(stats, "num_alloc_retries"),
        "num_ooms": _get(stats, "num_ooms"),
    }


def fields_from_flat(stats: Mapping[str, Any]) -> dict[str, int | None]:
    """Like :func:`fields_from_nested` for the flat ``torch.cuda.memory_stats()`` form."""
    nested: dict[str, Any] = {}
    for key, value in stats.items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return fields_from_nested(nested)


def cuda_fields(index: int) -> dict[str, int | None]:
    """Allocator counters and driver free/total of CUDA device ``index``.

    Never initialises CUDA: when this process has not, the counters are zero and
    ``free``/``total`` are ``None``.
    """
    if not torch.cuda.is_initialized():
        out = fields_from_nested({})
        out.update(free=None, total=None)
        return out
    out = fields_from_nested(torch.cuda.memory_stats_as_nested_dict(index))
    try:
        free, total = torch.cuda.mem_get_info(index)
        out.update(free=int(free), total=int(total))
    except RuntimeError:  # pragma: no cover - driver refused (e.g. device lost)
        out.update(free=None, total=None)
    return out


class _AllocatorPeak:
    """The allocator's global peak counter of one device, behind the Tracker protocol."""

    def __init__(self, module: Any, index: int) -> None:
        self._module = module
        self._index = index

    def current(self) -> int:
        return int(self._module.memory_allocated(self._index))

    def peak(self) -> int:
        return int(self._module.max_memory_allocated(self._index))

    def reset_peak(self) -> None:
        self._module.reset_peak_memory_stats(self._index)


def peak_counter(device_type: str, index: int) -> _AllocatorPeak:
    """The allocator peak counter of ``cuda:index`` or ``xpu:index``.

    ``current()`` initialises CUDA if needed: a Tracker on a CUDA device is an explicit
    request to measure it.
    """
    module = torch.cuda if device_type == "cuda" else getattr(torch, device_type)
    return _AllocatorPeak(module, index)
