"""``torchmem.chunked``: run a function over slices of a large input, adapting the slice
size to the memory there is.

It replaces the seed's ``process_large_batch``: results go into one preallocated output
(optionally in pinned host memory, so device-to-host copies are asynchronous), a chunk
that runs out of memory is retried at half the size, and after a few successes the size
grows again (halfway back towards the size that failed, like a binary search), so one
transient OOM does not slow the rest of the run.

Out of memory means a real ``torch.OutOfMemoryError`` / ``MemoryError`` raised by
``fn``, or, with a ``budget``, a chunk whose measured peak (:func:`torchmem.track`)
exceeds it. The budget path is the same logic, testable on a CPU.

Example:
    >>> emb = torchmem.chunked(model, tokens, device="cuda", out_device="cpu",
    ...                        pin_memory=True)

Known limitations:
    * ``fn`` must treat rows independently (row ``i`` of the output depends only on row
      ``i`` of the inputs). Then the result equals the unchunked one exactly for
      batch-invariant kernels; BLAS may sum in a different order for another batch size
      (differences of a few ulps for matmul).
    * Runs under ``torch.no_grad()``: the output is written in place, there is no graph.
    * With a budget, an over-budget chunk has already run when it is rejected; its
      work is repeated at the smaller size. On the CPU the budget counts tensor bytes
      (see :mod:`torchmem.collect.tracker`) and costs one Python call per aten op.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from torchmem.collect.readings import DeviceLike, resolve_device
from torchmem.errors import BudgetError, UsageError
from torchmem.model.optimize import ChunkReport
from torchmem.optimize._budget import (
    coerce_budget,
    default_budget,
    release_cached,
    run_measured,
)
from torchmem.units import format_bytes

__all__ = ["chunked"]

_TIP = "see docs/throughput.md#chunked"
ProgressArg = bool | Callable[[int, int], None] | None


def chunked(
    fn: Callable[..., Any],
    inputs: torch.Tensor | Sequence[Any],
    chunk_size: int | Literal["auto"] = "auto",
    *,
    budget: int | str | None = None,
    device: DeviceLike = None,
    out: torch.Tensor | Sequence[torch.Tensor] | None = None,
    out_device: DeviceLike = None,
    pin_memory: bool = False,
    min_chunk: int = 1,
    grow_after: int = 2,
    probe: int = 16,
    margin: float = 0.1,
    progress: ProgressArg = None,
    with_report: bool = False,
) -> Any:
    """Run ``fn`` over slices (along dim 0) of ``inputs`` into one preallocated output.

    Args:
        fn: called as ``fn(*slices)``; returns a tensor or a tuple/list of tensors, each
            with as many rows as the slice.
        inputs: a tensor, or a sequence of tensors with the same number of rows
            (non-tensor items are passed to every call unchanged).
        chunk_size: rows per call, or ``"auto"``: run a probe chunk of ``probe`` rows,
            measure its peak, and size chunks to fill ``(1 - margin) * budget``.
        budget: peak bytes a chunk may use (int or ``"512 MiB"``). With ``"auto"`` and no
            budget: the free memory of the compute device minus ``margin``. An explicit
            int ``chunk_size`` without a budget only backs off on real OOMs.
        device: move each slice to this device before calling ``fn`` (default: leave
            slices where they are). Also the device whose memory is measured.
        out: write into this tensor (or tuple of tensors) instead of allocating.
        out_device: device of the allocated output (default: where ``fn`` returned).
        pin_memory: allocate a CPU output in pinned memory; device-to-host copies are
            then issued with ``non_blocking=True`` and synchronised once at the end.
        min_chunk: never go below this many rows; an OOM at this size is raised.
        grow_after: consecutive successes after which the chunk grows again (0: never).
        probe: rows of the first chunk when ``chunk_size="auto"``.
        margin: fraction of the budget kept free when sizing chunks.
        progress: ``True`` shows a progress bar (rich, on stderr); ``None`` shows one
            when stderr is a terminal and the run passes 2 seconds; a callable is called
            as ``progress(done_rows, total_rows)``; ``False``: nothing.
        with_report: return ``(output, ChunkReport)`` instead of the output.

    Returns:
        The output tensor (or tuple of tensors), and the
        :class:`~torchmem.model.optimize.ChunkReport` when ``with_report``.

    Raises:
        UsageError: inconsistent inputs, sizes or ``out``.
        BudgetError: ``min_chunk`` rows exceed the budget.
        torch.OutOfMemoryError, MemoryError: ``fn`` runs out of memory at ``min_chunk``.

    Example:
        >>> y = torchmem.chunked(lambda x: x.softmax(-1), x, budget="64 MiB")
        >>> torch.equal(y, x.softmax(-1))
        True
    """
    started = time.perf_counter()
    items = _as_items(inputs)
    n = _rows(items)
    auto = chunk_size == "auto"
    if not auto and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise UsageError(
            f"torchmem.chunked: bad chunk_size; expected an int >= 1 or 'auto', got {chunk_size!r}",
            tip=_TIP,
        )
    if min_chunk < 1:
        raise UsageError(f"torchmem.chunked: expected min_chunk >= 1, got {min_chunk!r}", tip=_TIP)
    limit = coerce_budget(budget, "chunked")
    dev = resolve_device(device) if device is not None else _device_of(items)
    if auto and limit is None:
        limit = default_budget(dev, 0.0)
    measure = limit is not None
    size = max(min_chunk, min(n, probe if auto else int(chunk_size)))
    bar = _Progress(progress, n)
    state = _State(size, min_chunk, grow_after)
    output: Any = _check_out(out, n) if out is not None else None
    try:
        output, asynchronous, per_item, initial = _run(
            fn, items, n, dev, state, limit, measure, auto, margin, output,
            out_device, pin_memory, min_chunk, bar,
        )
    finally:
        bar.close()
    if asynchronous:
        torch.cuda.synchronize()
    if not with_report:
        return output
    report = ChunkReport(
        items=n,
        chunk_sizes=tuple(state.history),
        backoffs=state.backoffs,
        initial_chunk=initial,
        final_chunk=state.size,
        budget=limit,
        peak_per_item=per_item,
        seconds=time.perf_counter() - started,
    )
    return output, report


def _run(
    fn: Callable[..., Any], items: list[Any], n: int, dev: str, state: _State,
    limit: int | None, measure: bool, auto: bool, margin: float, output: Any,
    out_device: DeviceLike, pin_memory: bool, min_chunk: int, bar: _Progress,
) -> tuple[Any, bool, float | None, int]:
    """The chunk loop of :func:`chunked`: returns (output, asynchronous copies,
    peak per item, initial chunk size)."""
    per_item: float | None = None
    initial = 0 if auto else state.size
    asynchronous = False
    start = 0
    with torch.no_grad():
        if n == 0:
            result = fn(*_slice(items, 0, 0, dev))
            output = result if output is None else output
        while start < n:
            size = min(state.size, n - start)
            outcome = run_measured(lambda: fn(*_slice(items, start, start + size, dev)), dev, measure)
            over = (
                not outcome.oom and limit is not None and outcome.peak is not None
                and outcome.peak > limit
            )
            if outcome.oom or over:
                if size <= min_chunk:
                    _raise_unfit(outcome, size, limit)
                del outcome
                release_cached(dev)
                state.failed(size)
                continue
            result = outcome.value
            if auto and per_item is None and outcome.peak is not None:
                per_item = outcome.peak / size
                assert limit is not None
                fitted = int(limit * (1.0 - margin) / max(per_item, 1.0))
                state.size = state.target = max(min_chunk, min(n, fitted))
            if output is None:
                output = _allocate(result, n, out_device, pin_memory)
            asynchronous |= _write(output, result, start, size)
            del result, outcome
            start += size
            state.succeeded(size)
            if initial == 0:
                initial = state.size
            bar.update(start)
    return output, asynchronous, per_item, initial


class _State:
    """Chunk size control: halve on failure; after ``grow_after`` successes grow back
    towards ``target`` (the size asked for, or fitted by ``"auto"``), never up to a size
    that failed (halfway towards it instead, like a binary search)."""

    def __init__(self, size: int, floor: int, grow_after: int) -> None:
        self.size = size
        self.target = size
        self.floor = floor
        self.grow_after = grow_after
        self.ceiling: int | None = None  # smallest size that failed
        self.streak = 0
        self.backoffs = 0
        self.history: list[int] = []

    def failed(self, size: int) -> None:
        self.backoffs += 1
        self.streak = 0
        self.ceiling = size if self.ceiling is None else min(self.ceiling, size)
        # Back to the largest size known to work, else half.
        known = [g for g in self.history if g < size]
        self.size = max(known) if known and max(known) > size // 2 else max(self.floor, size // 2)

    def succeeded(self, size: int) -> None:
        self.history.append(size)
        if size < self.size or self.size >= self.target:  # tail, or nothing to regain
            return
        self.streak += 1
        if self.grow_after and self.streak >= self.grow_after:
            self.streak = 0
            grown = self.size * 2 if self.ceiling is None else (self.size + self.ceiling) // 2
            self.size = max(self.size, min(grown, self.target))


def _as_items(inputs: Any) -> list[Any]:
    if isinstance(inputs, torch.Tensor):
        return [inputs]
    if isinstance(inputs, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in inputs):
        return list(inputs)
    raise UsageError(
        f"torchmem.chunked: nothing to slice; expected a tensor or a sequence holding "
        f"tensors, got {type(inputs).__name__}",
        tip=_TIP,
    )


def _rows(items: list[Any]) -> int:
    rows = {v.shape[0] for v in items if isinstance(v, torch.Tensor) if v.dim() > 0}
    if len(rows) != 1 or any(isinstance(v, torch.Tensor) and v.dim() == 0 for v in items):
        raise UsageError(
            f"torchmem.chunked: inputs must share their first dimension; expected one "
            f"row count, got {sorted(rows) or 'a 0-d tensor'}",
            tip=_TIP,
        )
    return rows.pop()


def _device_of(items: list[Any]) -> str:
    first = next(v for v in items if isinstance(v, torch.Tensor))
    return resolve_device(first.device)


def _slice(items: list[Any], a: int, b: int, dev: str) -> list[Any]:
    out = []
    for v in items:
        if isinstance(v, torch.Tensor):
            v = v[a:b]
            if str(v.device) != dev and not (dev == "cpu" and v.device.type == "cpu"):
                v = v.to(dev, non_blocking=v.is_pinned())
        out.append(v)
    return out


def _outputs(result: Any) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in result):
        return list(result)
    raise UsageError(
        f"torchmem.chunked: fn must return tensors; expected a tensor or a tuple of "
        f"tensors, got {type(result).__name__}",
        tip=_TIP,
    )


def _allocate(result: Any, n: int, out_device: DeviceLike, pin: bool) -> Any:
    made = []
    for r in _outputs(result):
        if r.dim() == 0:
            raise UsageError(
                "torchmem.chunked: fn returned a 0-d tensor; expected one row per input "
                "row, got a scalar",
                tip=_TIP,
            )
        dev = torch.device(resolve_device(out_device)) if out_device is not None else r.device
        pinned = pin and dev.type == "cpu"
        made.append(torch.empty((n, *r.shape[1:]), dtype=r.dtype, device=dev, pin_memory=pinned))
    return made[0] if isinstance(result, torch.Tensor) else type(result)(made)


def _check_out(out: Any, n: int) -> Any:
    tensors = [out] if isinstance(out, torch.Tensor) else list(out)
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != n:
            raise UsageError(
                f"torchmem.chunked: out does not match the input; expected tensors with "
                f"{n} rows, got {getattr(t, 'shape', type(t).__name__)}",
                tip=_TIP,
            )
    return out


def _write(output: Any, result: Any, start: int, size: int) -> bool:
    """Copy a chunk's result into the output; True when a copy was asynchronous."""
    targets = [output] if isinstance(output, torch.Tensor) else list(output)
    results = _outputs(result)
    if len(targets) != len(results):
        raise UsageError(
            f"torchmem.chunked: fn returned {len(results)} tensors; expected "
            f"{len(targets)} like the output",
            tip=_TIP,
        )
    asynchronous = False
    for target, r in zip(targets, results):
        if r.dim() == 0 or r.shape[0] != size:
            raise UsageError(
                f"torchmem.chunked: fn must return one row per input row; expected "
                f"{size} rows, got shape {tuple(r.shape)}",
                tip=_TIP,
            )
        non_blocking = target.is_pinned() and r.device.type == "cuda"
        target[start : start + size].copy_(r, non_blocking=non_blocking)
        asynchronous |= non_blocking
    return asynchronous


def _raise_unfit(outcome: Any, size: int, limit: int | None) -> None:
    if outcome.oom:
        assert outcome.error is not None
        raise outcome.error
    raise BudgetError(
        f"torchmem.chunked: {size} row(s) do not fit the budget; expected a peak under "
        f"{format_bytes(limit or 0)}, got {format_bytes(outcome.peak or 0)}",
        tip="raise the budget, lower min_chunk, or make fn use less memory per row",
    )


class _Progress:
    """A rich progress bar on stderr, a callback, or nothing."""

    def __init__(self, progress: ProgressArg, total: int) -> None:
        self.total = total
        self.callback = progress if callable(progress) else None
        self.mode = progress
        self.started = time.perf_counter()
        self.bar: Any = None
        self.task: Any = None

    def update(self, done: int) -> None:
        if self.callback is not None:
            self.callback(done, self.total)
            return
        if self.bar is None and self._wanted():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task("torchmem.chunked", total=self.total)
            self.bar.start()
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def _wanted(self) -> bool:
        if self.mode is True:
            return True
        if self.mode is None:
            return sys.stderr.isatty() and time.perf_counter() - self.started > 2.0
        return False

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
