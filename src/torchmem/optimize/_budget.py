"""Budgets and measured trial runs shared by ``chunked`` and ``find_batch_size``.

A trial runs a callable inside :func:`torchmem.track` and reports its peak above the
trial's start, or that it ran out of memory. On CUDA the tracker reads the allocator's
peak counter (no per-op cost); on the CPU it counts tensor storages through a dispatch
mode (one Python call per aten op), which makes a byte budget enforceable and testable
on a laptop.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from torchmem.collect.tracker import track
from torchmem.errors import UsageError
from torchmem.optimize._tree import is_oom
from torchmem.units import parse_bytes

__all__ = ["Outcome", "run_measured", "release_cached", "default_budget", "coerce_budget"]


@dataclass
class Outcome:
    """Result of one measured run: ``value`` is ``None`` after an OOM."""

    value: Any
    peak: int | None
    oom: bool
    error: BaseException | None = None


def run_measured(fn: Callable[[], Any], device: str, measure: bool = True) -> Outcome:
    """Run ``fn()``; catch out-of-memory errors; measure the peak when ``measure``.

    The OOM exception is returned, not raised, with its traceback: drop the outcome,
    then call :func:`release_cached`, before a retry (the traceback's frames hold the
    failed call's tensors).
    """
    try:
        if measure:
            with track(device) as t:
                value = fn()
            return Outcome(value, t.peak_delta, False)
        return Outcome(fn(), None, False)
    except BaseException as exc:
        if not is_oom(exc):
            raise
        return Outcome(None, None, True, exc)


def release_cached(device: str) -> None:
    """After an OOM: collect garbage and return cached device blocks to the driver."""
    gc.collect()
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


def default_budget(device: str, margin: float) -> int:
    """Bytes a new workload may use on ``device``, keeping ``margin`` (a fraction) free.

    CUDA: free driver memory plus blocks the caching allocator holds but does not use.
    CPU and others: available host memory (``psutil``).
    """
    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        free, _total = torch.cuda.mem_get_info(index)
        cached = torch.cuda.memory_reserved(index) - torch.cuda.memory_allocated(index)
        return int((free + max(cached, 0)) * (1.0 - margin))
    import psutil

    return int(psutil.virtual_memory().available * (1.0 - margin))


def coerce_budget(budget: int | str | None, who: str) -> int | None:
    """Accept ``None``, an int or a string such as ``"512 MiB"``."""
    if budget is None:
        return None
    try:
        value = parse_bytes(budget)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"torchmem.{who}: bad budget; expected bytes as an int or a string such as "
            f"'512 MiB', got {budget!r}",
            tip="pass budget=<bytes> or budget='2 GiB'",
        ) from exc
    if value <= 0:
        raise UsageError(
            f"torchmem.{who}: the budget must be positive; expected bytes > 0, got {budget!r}",
            tip="pass budget=<bytes> or budget='2 GiB'",
        )
    return value
