"""Records of the throughput and headroom tools (no torch).

:class:`PoolStats` (:class:`torchmem.BufferPool`), :class:`ChunkReport`
(:func:`torchmem.chunked`), :class:`BatchTrial`, :class:`LinearFit` and
:class:`BatchSizeResult` (:func:`torchmem.find_batch_size`), :class:`LoaderFinding` and
:class:`DataLoaderCheck` (:func:`torchmem.check_dataloader`). All are frozen and
round-trip through JSON with ``to_dict()``/``from_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchmem.model._serde import Record

__all__ = [
    "PoolStats",
    "ChunkReport",
    "BatchTrial",
    "LinearFit",
    "BatchSizeResult",
    "LoaderFinding",
    "DataLoaderCheck",
]


@dataclass(frozen=True)
class PoolStats(Record):
    """Counters of a :class:`torchmem.BufferPool`.

    Attributes:
        hits: acquisitions served by a buffer the pool already held.
        misses: acquisitions that allocated a new buffer.
        waits: hits whose buffer was still in use by a device stream when handed out
            (the pool made the new user wait for it, on the device or the host).
        evictions: free buffers dropped to stay under ``max_bytes`` (or by ``clear``).
        bytes_held: bytes of every buffer the pool owns (free and lent out).
        bytes_free: bytes of the buffers waiting in the pool to be reused.
        buffers_free: number of those buffers.
        buffers_lent: buffers acquired and not yet released.
    """

    hits: int = 0
    misses: int = 0
    waits: int = 0
    evictions: int = 0
    bytes_held: int = 0
    bytes_free: int = 0
    buffers_free: int = 0
    buffers_lent: int = 0

    @property
    def hit_rate(self) -> float:
        """Fraction of acquisitions served from the pool (0.0 when none yet)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass(frozen=True)
class ChunkReport(Record):
    """How :func:`torchmem.chunked` split a run.

    Attributes:
        items: rows along the chunked dimension.
        chunk_sizes: the size of every chunk that succeeded, in order.
        backoffs: chunks that ran out of memory (or over the budget) and were retried
            at half the size.
        initial_chunk: the chunk size the run started with (after ``"auto"`` probing).
        final_chunk: the chunk size in use at the end.
        budget: the byte budget per chunk, or ``None`` when only real OOMs count.
        peak_per_item: measured peak bytes per row of the probe chunk, when ``"auto"``
            probed one; else ``None``.
        seconds: wall time of the whole run.
    """

    items: int
    chunk_sizes: tuple[int, ...] = ()
    backoffs: int = 0
    initial_chunk: int = 0
    final_chunk: int = 0
    budget: int | None = None
    peak_per_item: float | None = None
    seconds: float = 0.0

    @property
    def chunks(self) -> int:
        """Number of chunks that succeeded."""
        return len(self.chunk_sizes)


@dataclass(frozen=True)
class BatchTrial(Record):
    """One run of the step function during :func:`torchmem.find_batch_size`.

    Attributes:
        batch_size: the batch size tried.
        fits: whether it ran without OOM and with its peak under the budget.
        peak: bytes above the search's starting point at the trial's peak; ``None``
            when it raised an out-of-memory error before finishing.
        seconds: wall time of the trial.
        purpose: ``"warmup"``, ``"probe"``, ``"verify"``, ``"search"``.
    """

    batch_size: int
    fits: bool
    peak: int | None
    seconds: float
    purpose: str


@dataclass(frozen=True)
class LinearFit(Record):
    """Least-squares line ``peak = intercept + slope * batch_size`` through the probes.

    Attributes:
        intercept: bytes that do not depend on the batch size.
        slope: bytes per sample.
        r2: coefficient of determination (1.0 for a perfect line or two points).
        points: the ``(batch_size, peak)`` pairs the line was fitted to.
    """

    intercept: float
    slope: float
    r2: float
    points: tuple[tuple[int, int], ...] = ()

    def predict(self, batch_size: float) -> float:
        """Predicted peak bytes at ``batch_size``."""
        return self.intercept + self.slope * batch_size

    def solve(self, budget: float) -> float:
        """Batch size whose predicted peak equals ``budget`` (``inf`` for a flat line)."""
        if self.slope <= 0:
            return float("inf")
        return (budget - self.intercept) / self.slope


@dataclass(frozen=True)
class BatchSizeResult(Record):
    """What :func:`torchmem.find_batch_size` found, and how.

    Attributes:
        batch_size: the largest batch size found to fit (agreed across ranks).
        local_batch_size: this rank's own answer before the ``all_reduce`` (equal to
            ``batch_size`` outside ``torch.distributed``).
        budget: peak bytes allowed above the starting point.
        device: the device measured.
        method: ``"fit"`` (prediction verified), ``"fit+search"`` (prediction missed,
            binary search finished the job) or ``"search"`` (no usable fit).
        predicted: the batch size the fit predicted, or ``None``.
        fit: the fitted line, or ``None`` when fewer than two probes fitted.
        certified: ``batch_size + step`` was tried and did not fit (or the upper bound
            was reached), so ``batch_size`` is the exact maximum under the budget.
        trials: every run, in order.
        seconds: wall time of the search.
    """

    batch_size: int
    local_batch_size: int
    budget: int
    device: str
    method: str
    predicted: int | None = None
    fit: LinearFit | None = None
    certified: bool = False
    trials: tuple[BatchTrial, ...] = ()
    seconds: float = 0.0

    @property
    def runs(self) -> int:
        """Number of times the step function was run."""
        return len(self.trials)


@dataclass(frozen=True)
class LoaderFinding(Record):
    """One observation about a ``DataLoader``.

    Attributes:
        code: short kebab-case identifier (``"not-pinned"``, ``"no-workers"``...).
        severity: ``"info"``, ``"warning"``.
        message: what is the case and what it costs.
        fix: what to change.
    """

    code: str
    severity: str
    message: str
    fix: str = ""


@dataclass(frozen=True)
class DataLoaderCheck(Record):
    """Whether a ``DataLoader`` pins memory and overlaps loading and transfers.

    Attributes:
        target: the device batches are meant for.
        pin_memory: the loader's ``pin_memory`` setting.
        will_pin: whether its batches will actually be in pinned memory (``pin_memory``
            and an accelerator present).
        num_workers: worker processes.
        prefetch_factor: batches each worker loads ahead (``None`` without workers).
        batches_ahead: batches loaded ahead of the consumer (``num_workers *
            prefetch_factor``; 0 without workers).
        persistent_workers: whether workers survive between epochs.
        overlaps_loading: whether loading runs concurrently with the training step.
        overlaps_transfer: whether host-to-device copies can run asynchronously
            (pinned batches; the copy must still use ``non_blocking=True``).
        observed_pinned: whether a batch actually drawn was pinned (``None`` when no
            batch was drawn).
        batch_bytes: bytes of tensors in the drawn batch, or ``None``.
        findings: observations with fixes.
    """

    target: str
    pin_memory: bool
    will_pin: bool
    num_workers: int
    prefetch_factor: int | None
    batches_ahead: int
    persistent_workers: bool
    overlaps_loading: bool
    overlaps_transfer: bool
    observed_pinned: bool | None = None
    batch_bytes: int | None = None
    findings: tuple[LoaderFinding, ...] = ()
