"""Decide whether a per-step memory series grows: growing, flat, or undecided.

Pure functions over numbers (no torch). The doctor feeds them the bytes in use at each
step boundary; they answer with a :class:`~torchmem.model.capture.Growth` verdict that
says *why*.

Method:
    1. Skip the warm-up: the first ``max(2, n // 10)`` steps (optimizer state is created
       at step 1, allocators and caches warm up over the first few steps).
    2. Fit a robust line with the Theil-Sen estimator (median of pairwise slopes, so a
       few spikes or a garbage-collector sawtooth do not tilt it) and measure its
       goodness with R^2 of that line.
    3. Check for a plateau: the slope of the last half of the window must still be at
       least half the overall slope, otherwise the series rose and then levelled off.
    4. Call it ``growing`` only when the slope clears an absolute floor
       (``min_slope`` bytes per step), the total growth clears the noise (3 x the
       robust spread of the residuals), and the fit is good (R^2 >= ``min_r2``).
       Too few steps, or a clear slope with a poor fit, is ``undecided``.
    5. A series that would be ``flat`` or ``undecided`` is also read as a *sawtooth*
       (:func:`sawtooth_growth`): split where memory falls back, each stretch rising
       steadily and by a large share of where it started (a chain of graphs built over
       a sampling loop and let go when the next call replaces it, an accumulator emptied
       every few steps). Such a series is ``growing``: the peak grows with the stretch.

Known limitations:
    * A leak that starts late (after most of the window) shows as a poor fit and is
      reported ``undecided``, not ``growing``.
    * A bounded cache whose bound is larger than the number of steps run looks like
      growth: run more steps to see it level off.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

from torchmem.model.capture import Growth, StepRecord
from torchmem.units import format_bytes, format_delta

__all__ = ["Fit", "theil_sen", "fit_line", "warmup_steps", "detect_growth", "growth_by_device",
           "step_rate", "bytes_per_step", "detect_pass_growth", "sawtooth_growth", "split_at_resets"]

#: at most this many points enter the O(n^2) Theil-Sen fit (evenly subsampled)
_MAX_FIT_POINTS = 160


@dataclass(frozen=True)
class Fit:
    """A robust line fit: ``y = slope * x + intercept``."""

    slope: float
    intercept: float
    r2: float
    noise: float  # robust spread (1.4826 x MAD) of the residuals


def _subsample(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    n = len(xs)
    if n <= _MAX_FIT_POINTS:
        return list(xs), list(ys)
    idx = [round(i * (n - 1) / (_MAX_FIT_POINTS - 1)) for i in range(_MAX_FIT_POINTS)]
    return [xs[i] for i in idx], [ys[i] for i in idx]


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Median of the slopes of all pairs of points (0.0 with fewer than 2 distinct xs)."""
    xs, ys = _subsample(xs, ys)
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] != xs[i]
    ]
    return statistics.median(slopes) if slopes else 0.0


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Theil-Sen line through the points, with R^2 and the robust residual spread.

    Example:
        >>> f = fit_line([1, 2, 3, 4], [10, 20, 30, 40])
        >>> (f.slope, round(f.r2, 6))
        (10.0, 1.0)
    """
    if len(xs) != len(ys):
        raise ValueError(f"fit_line needs as many xs as ys; got {len(xs)} and {len(ys)}")
    if not xs:
        return Fit(0.0, 0.0, 0.0, 0.0)
    slope = theil_sen(xs, ys)
    intercept = statistics.median(y - slope * x for x, y in zip(xs, ys))
    residuals = [y - (slope * x + intercept) for x, y in zip(xs, ys)]
    mean = statistics.fmean(ys)
    ss_tot = sum((y - mean) ** 2 for y in ys)
    ss_res = sum(r * r for r in residuals)
    r2 = max(0.0, 1.0 - ss_res / ss_tot) if ss_tot > 0 else 0.0
    med = statistics.median(residuals)
    noise = 1.4826 * statistics.median(abs(r - med) for r in residuals)
    return Fit(slope, intercept, r2, noise)


def warmup_steps(n: int) -> int:
    """How many leading steps to skip as warm-up for a series of ``n`` steps."""
    return min(max(2, n // 10), 50)


def detect_growth(points: Sequence[tuple[int, float]], device: str = "cpu", *,
                  min_steps: int = 8, min_slope: float = 1024.0, min_r2: float = 0.6,
                  warmup: int | None = None) -> Growth:
    """Verdict on one device's per-step series.

    Args:
        points: ``(step, bytes)`` pairs in step order.
        device: the device the series belongs to (copied into the verdict).
        min_steps: fewest steps, after warm-up, needed to decide.
        min_slope: bytes per step below which a series is flat whatever its fit.
        min_r2: goodness of fit needed to call a clear slope ``growing``.
        warmup: leading steps to skip (default: :func:`warmup_steps`).

    Returns:
        A :class:`Growth` with ``verdict`` in ``growing``/``flat``/``undecided`` and a
        one-sentence ``reason``.

    Example:
        >>> g = detect_growth([(i, 1000 + 4096 * i) for i in range(1, 31)])
        >>> g.verdict, g.bytes_per_step
        ('growing', 4096.0)
    """
    skip = warmup_steps(len(points)) if warmup is None else warmup
    window = list(points[skip:])
    if len(window) < min_steps:
        return Growth(device=device, verdict="undecided",
                      first_step=window[0][0] if window else 0,
                      last_step=window[-1][0] if window else 0,
                      reason=f"only {len(window)} steps after skipping {skip} warm-up steps; "
                             f"need at least {min_steps} to decide (run more steps)")
    xs = [float(s) for s, _ in window]
    ys = [float(v) for _, v in window]
    fit = fit_line(xs, ys)
    first, last = window[0][0], window[-1][0]
    span = xs[-1] - xs[0]
    total = int(round(fit.slope * span))
    half = len(window) // 2
    late = theil_sen(xs[half:], ys[half:])

    def verdict(kind: str, reason: str) -> Growth:
        return Growth(device=device, verdict=kind, bytes_per_step=round(fit.slope, 1),
                      r2=round(fit.r2, 4), first_step=first, last_step=last,
                      total_growth=total, reason=reason)

    saw = sawtooth_growth(window, device, min_slope=min_slope)
    if saw is not None and (fit.slope < min_slope or late < 0.5 * fit.slope
                            or total < 3 * fit.noise or fit.r2 < min_r2):
        return saw
    if fit.slope < min_slope:
        return verdict("flat",
                       f"changes by {format_delta(fit.slope)} per step over steps "
                             f"{first}-{last}, below the {format_bytes(min_slope)}/step floor")
    if late < 0.5 * fit.slope:
        return verdict("flat",
                       f"rose early, then levelled off: {format_delta(late)} per step "
                             f"over the last {len(window) - half} steps")
    if total < 3 * fit.noise:
        return verdict("undecided",
                       f"a slope of {format_delta(fit.slope)} per step, but the noise "
                             f"({format_bytes(fit.noise)}) is as large as the growth")
    if fit.r2 < min_r2:
        return verdict("undecided",
                       f"a slope of {format_delta(fit.slope)} per step with a poor fit "
                             f"(R^2 {fit.r2:.2f}); memory rises in bursts, not steadily")
    return verdict("growing",
                       f"grows by {format_delta(fit.slope)} per step over steps "
                         f"{first}-{last} (R^2 {fit.r2:.2f})")


#: a reading below the one before by more than this share of its stretch's rise so far
#: starts a new stretch
_RESET_SHARE = 0.5
#: share of the window's readings the judged stretches must hold
_SAW_COVER = 0.75
#: each stretch's rise, as a share of the reading it started from
_SAW_RISE_SHARE = 0.1


def split_at_resets(points: Sequence[tuple[int, float]]) -> list[list[tuple[int, float]]]:
    """The stretches of a series between the readings where memory falls back: a reading
    below the one before by more than half of what its stretch rose so far.

    Example:
        >>> [len(s) for s in split_at_resets([(1, 10), (2, 20), (3, 30), (4, 12), (5, 22)])]
        [3, 2]
    """
    stretches: list[list[tuple[int, float]]] = []
    for point in points:
        current = stretches[-1] if stretches else None
        if current is None:
            stretches.append([point])
            continue
        rise = current[-1][1] - current[0][1]
        if rise > 0 and current[-1][1] - point[1] > _RESET_SHARE * rise:
            stretches.append([point])
        else:
            current.append(point)
    return stretches


def sawtooth_growth(window: Sequence[tuple[int, float]], device: str = "cpu", *,
                    min_slope: float = 1024.0) -> Growth | None:
    """A ``growing`` verdict when the series is a sawtooth, else None.

    The series is split at its resets (:func:`split_at_resets`); it is a sawtooth when at
    least two stretches have three readings or more, those hold at least three quarters
    of the readings, every one of them rises steadily (the test of
    :func:`detect_pass_growth`) by at least a tenth of the reading it started from,
    and memory falls back after each. ``bytes_per_step`` is the median slope within the
    stretches; ``total_growth`` the median rise of one.

    Example:
        >>> saw = [(s, 1e6 + 5e5 * (s % 10)) for s in range(1, 41)]
        >>> sawtooth_growth(saw).verdict
        'growing'
    """
    from dataclasses import replace

    stretches = [s for s in split_at_resets(window) if len(s) >= 3]
    if len(stretches) < 2 or sum(len(s) for s in stretches) < _SAW_COVER * len(window):
        return None
    if any(s[-1][1] - s[0][1] < _SAW_RISE_SHARE * s[0][1] for s in stretches):
        return None
    g = detect_pass_growth(stretches, device, min_slope=min_slope)
    falls = sum(1 for a, b in zip(stretches, stretches[1:]) if b[0][1] < a[-1][1])
    if g.verdict != "growing" or falls < len(stretches) - 1:
        return None
    return replace(g, first_step=window[0][0], last_step=window[-1][0], stretches=len(stretches),
                   reason=(f"rises by {format_delta(g.bytes_per_step)} per step within each of "
                           f"{len(stretches)} stretches of steps {window[0][0]}-{window[-1][0]} "
                           f"({format_bytes(g.total_growth)} per stretch) and falls back "
                           f"after each: a sawtooth whose peak grows with the stretch"))


def step_rate(points: Sequence[tuple[int, float]], warmup: int | None = None) -> float | None:
    """Bytes per step of a per-step series: the slope :func:`detect_growth` reports.

    The Theil-Sen slope of the points after the warm-up, rounded as in a verdict; None
    with fewer than two points after the warm-up. Every report shows this one number
    for "growth per step", so that a table and a verdict never disagree.
    """
    skip = warmup_steps(len(points)) if warmup is None else warmup
    window = list(points[skip:])
    if len({s for s, _ in window}) < 2:
        return None
    return round(theil_sen([float(s) for s, _ in window], [float(v) for _, v in window]), 1)


def bytes_per_step(steps: Sequence[StepRecord], device: str,
                   growth: Sequence[Growth] = ()) -> float | None:
    """The growth per step of ``device`` as a report shows it.

    The value stored in the capture's verdict for ``device`` when there is one (None when
    that verdict had too few steps to fit a line), else :func:`step_rate` of the series,
    which is the same computation.
    """
    for g in growth:
        if g.device == device:
            if g.verdict == "undecided" and not g.bytes_per_step and not g.r2:
                return None
            return g.bytes_per_step
    return step_rate([(r.step, float(r.used[device])) for r in steps if device in r.used])


def growth_by_device(steps: Sequence[StepRecord], **kwargs: object) -> list[Growth]:
    """One :func:`detect_growth` verdict per device present in ``steps``."""
    devices: list[str] = []
    for record in steps:
        for device in record.used:
            if device not in devices:
                devices.append(device)
    out = []
    for device in devices:
        points = [(r.step, float(r.used[device])) for r in steps if device in r.used]
        out.append(detect_growth(points, device, **kwargs))  # type: ignore[arg-type]
    return out


#: readings a phase made of one pass needs to be judged as a series of its own
SINGLE_PASS_POINTS = 12


def _one_pass(readings: Sequence[tuple[int, float]], device: str, min_slope: float) -> Growth:
    """A phase with one long pass (an evaluation or inference loop after the last training
    step): its readings are a series of their own, judged as the steps are (warm-up
    skipped, Theil-Sen, R^2, plateau), by forward number within the pass."""
    from dataclasses import replace

    g = detect_growth([(i, float(v)) for i, (_, v) in enumerate(readings, 1)], device,
                      min_slope=min_slope)
    if g.verdict == "growing":
        reason = (f"rises by {format_delta(g.bytes_per_step)} per forward over forwards "
                  f"{g.first_step}-{g.last_step} of its one pass (R^2 {g.r2:.2f})")
    else:
        reason = f"one pass of {len(readings)} forwards: {g.reason}"
    return replace(g, reason=reason)


def detect_pass_growth(passes: Sequence[Sequence[tuple[int, float]]], device: str = "cpu", *,
                       min_points: int = 3, min_slope: float = 1024.0) -> Growth:
    """Verdict on a phase that runs in separate passes (evaluation passes, epochs).

    Memory that rises within every pass and falls back when the pass ends (a sawtooth:
    an accumulator emptied at each pass) never makes a steady line over the whole run,
    yet it is growth: of that phase, and its peak grows with the pass length. Each pass
    with at least ``min_points`` readings gets its own Theil-Sen slope; the phase is
    ``growing`` when at least two passes were judged and every judged pass rises by at
    least ``min_slope`` bytes per step and by more than its own residual noise. A phase
    that is one pass of at least :data:`SINGLE_PASS_POINTS` readings (an evaluation
    loop after the last training step) is judged as one series, with
    :func:`detect_growth` (``first_step``/``last_step`` count its forwards).

    Args:
        passes: per pass, ``(step, bytes)`` readings in order.
        device: copied into the verdict.

    Returns:
        A :class:`Growth` (``bytes_per_step`` is the median slope within passes,
        ``total_growth`` the median rise of one pass).

    Example:
        >>> saw = [[(i, 5000.0 * i) for i in range(1, 9)] for _ in range(3)]
        >>> detect_pass_growth(saw).verdict
        'growing'
    """
    if len(passes) == 1 and len(passes[0]) >= SINGLE_PASS_POINTS:
        return _one_pass(passes[0], device, min_slope)
    fits = []
    for readings in passes:
        if len(readings) >= min_points:
            xs = [float(s) for s, _ in readings]
            ys = [float(v) for _, v in readings]
            fits.append((fit_line(xs, ys), xs[-1] - xs[0], ys))
    if len(fits) < 2:
        return Growth(device=device, verdict="undecided",
                      reason=f"{len(fits)} of {len(passes)} passes had at least {min_points} "
                             "steps; need two to judge growth within passes")
    slope = statistics.median(f.slope for f, _, _ in fits)
    rise = statistics.median(f.slope * span for f, span, _ in fits)
    r2 = statistics.median(f.r2 for f, _, _ in fits)
    rising = [f.slope >= min_slope and f.slope * span > 3 * f.noise for f, span, _ in fits]
    resets = sum(1 for (_, _, a), (_, _, b) in zip(fits, fits[1:]) if b[0] < a[-1] - 0.5 * (a[-1] - a[0]))
    base = Growth(device=device, verdict="flat", bytes_per_step=round(slope, 1), r2=round(r2, 4),
                  total_growth=int(round(rise)), reason="")
    from dataclasses import replace

    if all(rising):
        how = (f"and falls back after {resets} of them" if resets else "and does not fall back")
        return replace(base, verdict="growing",
                       reason=f"rises by {format_delta(slope)} per step within each of "
                              f"{len(fits)} passes ({format_bytes(rise)} per pass) {how}")
    if any(rising):
        return replace(base, verdict="undecided",
                       reason=f"rises within {sum(rising)} of {len(fits)} passes only")
    return replace(base, reason=f"no steady rise within {len(fits)} passes "
                                f"(median {format_delta(slope)} per step)")
