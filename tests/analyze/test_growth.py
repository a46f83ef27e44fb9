"""Growth detection: verdicts on series whose truth is known."""

from __future__ import annotations

import random

import pytest

from torchmem.analyze.growth import (
    SINGLE_PASS_POINTS,
    detect_growth,
    detect_pass_growth,
    fit_line,
    growth_by_device,
    theil_sen,
    warmup_steps,
)
from torchmem.model.capture import StepRecord


def series(fn, n=60):
    return [(i, float(fn(i))) for i in range(1, n + 1)]


def test_exact_line_is_growing_with_exact_slope():
    g = detect_growth(series(lambda i: 10_000_000 + 4096 * i))
    assert g.verdict == "growing"
    assert g.bytes_per_step == 4096.0
    assert g.r2 == 1.0
    assert g.first_step == warmup_steps(60) + 1 and g.last_step == 60
    assert g.total_growth == 4096 * (60 - g.first_step)


def test_theil_sen_ignores_spikes_that_tilt_least_squares():
    xs = list(range(40))
    ys = [1000.0 * x for x in xs]
    ys[5] += 1e9  # one spike (e.g. a transient buffer at the sampling instant)
    assert theil_sen(xs, ys) == pytest.approx(1000.0)


def test_noisy_flat_series_is_flat():
    rng = random.Random(0)
    g = detect_growth(series(lambda i: 1e8 + rng.gauss(0, 50_000)))
    assert g.verdict == "flat"


def test_small_real_leak_under_noise_is_found():
    rng = random.Random(1)
    g = detect_growth(series(lambda i: 1e8 + 8192 * i + rng.gauss(0, 2000)))
    assert g.verdict == "growing"
    assert 7000 < g.bytes_per_step < 9500


def test_rise_then_plateau_is_flat():
    # optimizer state and warm-up for 15 steps, then nothing more
    g = detect_growth(series(lambda i: 1e8 + min(i, 15) * 1e6))
    assert g.verdict == "flat"
    g = detect_growth(series(lambda i: 1e8 + min(i, 35) * 1e6))  # plateau in the window
    assert g.verdict == "flat"
    assert "levelled off" in g.reason


def test_garbage_collector_sawtooth_is_not_growth():
    g = detect_growth(series(lambda i: 1e8 + (i % 10) * 1e6))
    assert g.verdict != "growing"


def test_too_few_steps_is_undecided_and_says_why():
    g = detect_growth(series(lambda i: 1e6 * i, n=6))
    assert g.verdict == "undecided"
    assert "need at least" in g.reason


def test_below_floor_is_flat_even_if_perfectly_linear():
    # a list of Python floats: 8 bytes per step of list storage
    g = detect_growth(series(lambda i: 1e8 + 8 * i))
    assert g.verdict == "flat"


def test_per_epoch_staircase_is_growth():
    # 16 MB more every 20 steps (a leak per epoch), with jitter
    g = detect_growth(series(lambda i: 1e8 + (i // 20) * 16e6 + (i % 3) * 3e6, n=60))
    assert g.verdict == "growing"
    assert 0.5e6 < g.bytes_per_step < 1.2e6


def test_noise_as_large_as_growth_is_not_growing():
    rng = random.Random(3)
    g = detect_growth(series(lambda i: 1e8 + 2048 * i + rng.gauss(0, 400_000)))
    assert g.verdict in ("undecided", "flat")


def test_fit_line_r2_and_noise():
    f = fit_line([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    assert (f.slope, f.intercept, f.r2, f.noise) == (2.0, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        fit_line([1, 2], [1])


def test_growth_by_device_reads_every_device():
    steps = [StepRecord(step=i, time=float(i), used={"cpu": 1000, "cuda:0": 10_000 * i})
             for i in range(1, 41)]
    verdicts = {g.device: g.verdict for g in growth_by_device(steps)}
    assert verdicts == {"cpu": "flat", "cuda:0": "growing"}


def test_one_long_pass_is_judged_as_a_series():
    # an evaluation loop after the last training step: one pass, counters not from 1
    rising = [(100 + i, 1e6 + 300 * 1024 * i) for i in range(40)]
    g = detect_pass_growth([rising])
    assert g.verdict == "growing" and g.bytes_per_step == 300 * 1024
    assert "per forward" in g.reason and "its one pass" in g.reason
    flat = [(100 + i, 1e6 + 512 * (i % 3)) for i in range(40)]
    assert detect_pass_growth([flat]).verdict == "flat"
    short = rising[:SINGLE_PASS_POINTS - 1]
    assert detect_pass_growth([short]).verdict == "undecided"  # two passes needed, as before


# -- sawtooth over the run's own steps ------------------------------------------------------

from torchmem.analyze.growth import sawtooth_growth, split_at_resets  # noqa: E402


def test_split_at_resets_cuts_where_memory_falls_back_by_half_its_rise():
    pts = [(1, 100.0), (2, 200.0), (3, 300.0), (4, 120.0), (5, 220.0), (6, 210.0), (7, 320.0)]
    # 300 -> 120 falls by more than half of the 200 risen: a reset; 220 -> 210 does not
    assert [[s for s, _ in part] for part in split_at_resets(pts)] == [[1, 2, 3], [4, 5, 6, 7]]


def test_a_chain_rebuilt_every_call_is_growing_with_the_slope_within_the_stretches():
    # 24 steps a call, 3 calls: 1 MiB more per step, back to the base after each call
    base, per = 100 * 2**20, 2**20
    pts = [(s, float(base + per * ((s - 1) % 24))) for s in range(1, 73)]
    g = detect_growth(pts)
    assert g.verdict == "growing"
    assert g.stretches == 3
    assert g.bytes_per_step == pytest.approx(per)
    assert "falls back after each" in g.reason


def test_a_single_rise_then_a_fall_is_no_sawtooth():
    pts = [(s, 1e8 + 1e6 * s) for s in range(1, 30)] + [(s, 1e8) for s in range(30, 60)]
    assert sawtooth_growth(pts) is None


def test_noise_and_small_teeth_are_no_sawtooth():
    rnd = random.Random(3)
    noisy = [(s, 1e8 + rnd.uniform(-1e6, 1e6)) for s in range(1, 80)]
    assert sawtooth_growth(noisy) is None
    assert detect_growth(noisy).verdict != "growing"
    # teeth that rise by 2% of the heap (a collector's cycle of small garbage)
    small = [(s, 1e8 + 2e6 * ((s % 10) / 10)) for s in range(1, 80)]
    assert sawtooth_growth(small) is None


def test_a_steady_line_keeps_its_own_verdict():
    g = detect_growth(series(lambda i: 10_000_000 + 4096 * i))
    assert g.stretches == 0
