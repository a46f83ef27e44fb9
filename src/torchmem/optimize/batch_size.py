"""``torchmem.find_batch_size``: the largest batch that fits, in a handful of runs.

The usual search (accelerate, Lightning) doubles the batch until it runs out of memory,
then bisects: about ``2 * log2(max)`` runs, most of them at large, slow sizes. The peak
memory of a training step is close to linear in the batch size (activations grow with
it; weights, gradients and optimizer state do not), so torchmem measures the peak at a
few small sizes, fits ``peak = intercept + slope * batch``, predicts the largest size
under the budget, and verifies it: one run at the prediction, one just above it to prove
it is the maximum. When the prediction misses (the peak is not one straight line, e.g.
the optimizer step dominates small batches and backward large ones), every finished run
is one more measured point: secant steps between the nearest sizes that fit and do not
fit close in on the answer, with a bisection step whenever a secant step fails to halve
the interval, so the worst case stays logarithmic.

The peak of each run is measured with :func:`torchmem.track`: the allocator's peak
counter on CUDA, exact tensor bytes on the CPU. The budget is bytes above what was
allocated when the search started: by default the device's free memory minus a safety
margin; pass ``budget=`` on the CPU (or to leave room for something else).

Under ``torch.distributed`` every rank runs the search and all ranks agree on the
smallest answer (``all_reduce`` with ``MIN``), so no rank runs out of memory.

Example:
    >>> def step(bs):
    ...     x = torch.randn(bs, 512, device="cuda")
    ...     model(x).sum().backward()
    ...     opt.step(); opt.zero_grad(set_to_none=True)
    >>> result = torchmem.find_batch_size(step, device="cuda", high=4096)
    >>> result.batch_size, result.runs, result.method   # doctest: +SKIP
    (1536, 6, 'fit')

Known limitations:
    * ``step_fn`` must release what it allocates (return nothing big, keep no history);
      memory it keeps grows the baseline of later runs and is charged to them.
    * A step whose memory is far from linear (cuDNN algorithm choice, padding to bucket
      sizes) makes the prediction miss; the search then costs about as many runs as
      bisection, but the answer is still verified.
    * The first run (``warmup``) creates lazily allocated state such as optimizer
      moments; it is not used in the fit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from torchmem.collect.readings import DeviceLike, resolve_device
from torchmem.collect.tracker import Tracker, track
from torchmem.errors import BudgetError, UsageError
from torchmem.model.optimize import BatchSizeResult, BatchTrial, LinearFit
from torchmem.optimize._budget import coerce_budget, default_budget, release_cached, run_measured
from torchmem.units import format_bytes

__all__ = ["find_batch_size", "fit_line"]

_TIP = "see docs/throughput.md#find_batch_size"
#: an extrapolated guess goes at most this many times past the largest size that fit
_GROWTH = 256


def find_batch_size(
    step_fn: Callable[[int], Any],
    *,
    device: DeviceLike = None,
    budget: int | str | None = None,
    margin: float = 0.1,
    low: int = 1,
    high: int | None = None,
    probes: Sequence[int] = (2, 4, 8),
    multiple_of: int = 1,
    warmup: bool = True,
    method: Literal["fit", "doubling"] = "fit",
    distributed: bool | None = None,
) -> BatchSizeResult:
    """Find the largest batch size whose step fits the memory budget.

    Args:
        step_fn: runs one step at the given batch size (build the batch inside).
        device: device whose memory is measured (default: current accelerator, else CPU).
        budget: peak bytes allowed above the memory in use when the search starts (int
            or ``"6 GiB"``). Default: the device's free memory (CPU: available RAM)
            minus ``margin``.
        margin: fraction of free memory kept free when the budget is the default.
        low: smallest batch size considered.
        high: largest batch size considered (e.g. the dataset size); ``None``: no bound.
        probes: batch sizes (in multiples of ``multiple_of``) measured for the fit.
        multiple_of: only consider multiples of this (e.g. 8 for tensor cores).
        warmup: run the first probe once before measuring, so lazily created state
            (optimizer moments, cuBLAS workspaces) does not bend the fit.
        method: ``"fit"`` (default) or ``"doubling"`` (double until it does not fit,
            then bisect: the usual approach, kept for comparison).
            An extrapolated guess goes at most 256 times past the largest size that fit.
        distributed: agree on the minimum across ranks; ``None``: when
            ``torch.distributed`` is initialised.

    Returns:
        A :class:`~torchmem.model.optimize.BatchSizeResult` with the size, the fit and
        every trial.

    Raises:
        UsageError: bad arguments.
        BudgetError: not even the smallest batch size fits.
        Exception: whatever ``step_fn`` raised that is not an out-of-memory error.
    """
    started = time.perf_counter()
    m = _positive_int(multiple_of, "multiple_of")
    lo_units = max(1, math.ceil(_positive_int(low, "low") / m))
    hi_units = None if high is None else _positive_int(high, "high") // m
    if hi_units is not None and hi_units < lo_units:
        raise UsageError(
            f"torchmem.find_batch_size: empty range; expected low <= high (in multiples "
            f"of {m}), got low={low}, high={high}",
            tip=_TIP,
        )
    if method not in ("fit", "doubling"):
        raise UsageError(
            f"torchmem.find_batch_size: unknown method; expected 'fit' or 'doubling', "
            f"got {method!r}",
            tip=_TIP,
        )
    dev = resolve_device(device)
    limit = coerce_budget(budget, "find_batch_size")
    if limit is None:
        limit = default_budget(dev, margin)
    search = _Search(step_fn, dev, limit, m, lo_units, hi_units)
    with track(dev) as outer:
        search.outer = outer
        if method == "doubling":
            search.doubling()
        else:
            search.fitted([max(lo_units, int(p)) for p in probes], warmup)
    local = search.best * m
    if search.best == 0:
        raise BudgetError(
            f"torchmem.find_batch_size: no batch size fits; expected a peak under "
            f"{format_bytes(limit)} at batch size {lo_units * m}, got "
            f"{_describe(search.trials[-1])}",
            tip="lower low=, raise budget=, or free memory before the search",
        )
    agreed = _agree(local, distributed, dev)
    return BatchSizeResult(
        batch_size=agreed,
        local_batch_size=local,
        budget=limit,
        device=dev,
        method=search.method,
        predicted=None if search.predicted is None else search.predicted * m,
        fit=search.fit,
        certified=search.certified,
        trials=tuple(search.trials),
        seconds=time.perf_counter() - started,
    )


class _Search:
    """Search state in units of ``multiple_of``: ``best`` fits, ``bad`` does not."""

    def __init__(
        self, step_fn: Callable[[int], Any], dev: str, limit: int, m: int, lo: int,
        hi: int | None,
    ) -> None:
        self.step_fn = step_fn
        self.dev = dev
        self.limit = limit
        self.m = m
        self.lo = lo
        self.hi = hi
        self.outer: Tracker | None = None
        self.trials: list[BatchTrial] = []
        self.known: dict[int, bool] = {}
        self.best = 0  # largest unit count known to fit (0: none)
        self.bad: int | None = None if hi is None else hi + 1  # smallest known not to fit
        self.fit: LinearFit | None = None
        self.predicted: int | None = None
        self.method = "search"
        self.peaks: dict[int, int] = {}  # units -> measured peak (runs that finished)

    # -- one run -------------------------------------------------------------------
    def run(self, units: int, purpose: str) -> BatchTrial:
        assert self.outer is not None
        base = self.outer.delta
        size = units * self.m
        began = time.perf_counter()
        outcome = run_measured(lambda: self.step_fn(size), self.dev)
        seconds = time.perf_counter() - began
        if outcome.oom:
            trial = BatchTrial(size, False, None, seconds, purpose)
            del outcome
            release_cached(self.dev)
        else:
            assert outcome.peak is not None
            peak = base + outcome.peak
            del outcome
            trial = BatchTrial(size, peak <= self.limit, peak, seconds, purpose)
        self.trials.append(trial)
        if purpose != "warmup":
            self.record(units, trial.fits)
            if trial.peak is not None:
                self.peaks[units] = trial.peak
        return trial

    def record(self, units: int, fits: bool) -> None:
        self.known[units] = fits
        if fits:
            self.best = max(self.best, units)
        elif self.bad is None or units < self.bad:
            self.bad = units

    def check(self, units: int, purpose: str) -> bool:
        if units in self.known:
            return self.known[units]
        return self.run(units, purpose).fits

    @property
    def certified(self) -> bool:
        return self.best > 0 and self.bad is not None and self.bad == self.best + 1

    # -- strategies ----------------------------------------------------------------
    def bisect(self) -> None:
        """Binary search between ``best`` (fits, or ``lo - 1``) and ``bad``."""
        low = max(self.best, self.lo - 1)
        while self.bad is not None and self.bad - low > 1:
            mid = (low + self.bad) // 2
            if self.check(mid, "search"):
                low = mid

    def doubling(self) -> None:
        units = self.lo
        while self.bad is None or units < self.bad:
            if not self.check(units, "search"):
                break
            units = units * 2 if self.hi is None else min(units * 2, self.hi)
            if self.hi is not None and units == self.best:
                break
        self.bisect()

    def fitted(self, probes: list[int], warmup: bool) -> None:
        sizes = sorted(set(p for p in probes if self.hi is None or p <= self.hi))
        if not sizes:
            sizes = [self.lo]
        if warmup:
            self.run(sizes[0], "warmup")
        points: list[tuple[int, int]] = []
        for units in sizes:
            trial = self.run(units, "probe")
            if not trial.fits:
                break
            assert trial.peak is not None
            points.append((trial.batch_size, trial.peak))
        if len(points) >= 2:
            self.fit = fit_line(points)
        self.refine()

    def refine(self) -> None:
        """Secant steps on the measured peaks until ``best + 1 == bad``.

        Each step draws a line through the largest size that fits and the smallest that
        did not (interpolation; on a convex curve the answer lands just below the
        budget), or through the two largest that fit (extrapolation, at most
        ``_GROWTH`` times further), and tries the size it predicts. A step that does not
        halve the bracket is followed by a bisection step, so the worst case stays
        logarithmic.
        """
        bisect_next = False
        first = True
        while True:
            low = max(self.best, self.lo - 1)
            if self.bad is not None and self.bad - low <= 1:
                if self.method == "search" and self.predicted is not None:
                    self.method = "fit+search"
                return
            guess = None if bisect_next else self.secant(low)
            if guess is None:
                if self.bad is None:
                    guess = max(2 * low, low + 1)
                else:
                    guess = (low + self.bad) // 2
            elif first:
                self.predicted = guess
            hi = self.bad - 1 if self.bad is not None else guess
            guess = min(max(guess, low + 1), hi)
            width = None if self.bad is None else self.bad - low
            fits = self.check(guess, "verify" if first else "search")
            if first and self.predicted is not None:
                certified = fits and (
                    (self.bad is not None and guess + 1 >= self.bad)
                    or not self.check(guess + 1, "verify")
                )
                self.method = "fit" if certified else "fit+search"
            first = False
            new_width = None if self.bad is None else self.bad - max(self.best, self.lo - 1)
            bisect_next = (
                not bisect_next and width is not None and new_width is not None
                and new_width * 2 > width
            )

    def secant(self, low: int) -> int | None:
        """Size (in units) where the line through the nearest measured points meets the
        budget, or ``None`` when no rising line is available."""
        fitting = sorted((u, p) for u, p in self.peaks.items() if p <= self.limit)
        over = sorted((u, p) for u, p in self.peaks.items() if p > self.limit)
        if not fitting:
            return None
        if over:
            (u0, p0), (u1, p1) = fitting[-1], over[0]
            extrapolating = False
        elif len(fitting) >= 2:
            (u0, p0), (u1, p1) = fitting[-2], fitting[-1]
            extrapolating = True
        else:
            return None
        if u1 == u0 or p1 <= p0:
            return None
        slope = (p1 - p0) / (u1 - u0)
        target = u0 + (self.limit - p0) / slope
        if not math.isfinite(target):
            return None
        guess = math.floor(target)
        if extrapolating:
            guess = min(guess, max(fitting[-1][0], 1) * _GROWTH)
        if self.hi is not None:
            guess = min(guess, self.hi)
        return max(guess, low + 1)


def fit_line(points: Sequence[tuple[int, int]]) -> LinearFit:
    """Least-squares line through ``(batch_size, peak)`` points.

    Raises:
        UsageError: fewer than two distinct batch sizes.
    """
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 2 or sxx == 0:
        raise UsageError(
            f"torchmem.find_batch_size: a line needs two batch sizes; expected >= 2 "
            f"distinct sizes, got {sorted(set(xs))}",
            tip=_TIP,
        )
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys))
    r2 = 1.0 if ss_tot == 0 else max(0.0, 1.0 - ss_res / ss_tot)
    return LinearFit(
        intercept=intercept, slope=slope, r2=r2, points=tuple((int(x), int(y)) for x, y in points)
    )


def _agree(local: int, distributed: bool | None, dev: str) -> int:
    """``all_reduce(MIN)`` of the local answer across ranks when distributed."""
    if distributed is False:
        return local
    import torch
    import torch.distributed as dist

    active = dist.is_available() and dist.is_initialized()
    if not active:
        if distributed:
            raise UsageError(
                "torchmem.find_batch_size: distributed=True but torch.distributed is not "
                "initialised; expected init_process_group() first, got no process group",
                tip="call torch.distributed.init_process_group() or pass distributed=None",
            )
        return local
    backend = dist.get_backend()
    on = dev if backend == "nccl" else "cpu"
    value = torch.tensor([local], dtype=torch.int64, device=on)
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return int(value.item())


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(
            f"torchmem.find_batch_size: bad {name}; expected an int >= 1, got {value!r}",
            tip=_TIP,
        )
    return value


def _describe(trial: BatchTrial) -> str:
    if trial.peak is None:
        return "an out-of-memory error"
    return f"a peak of {format_bytes(trial.peak)}"
