"""find_batch_size: exact maximum under a CPU byte budget, few runs, fallbacks, ranks."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

import torchmem
from torchmem.errors import BudgetError, UsageError
from torchmem.optimize.batch_size import find_batch_size, fit_line

PER_SAMPLE = 4000 * 2  # a (4000 B) and a * 2 (4000 B) per sample
FIXED = 10_000


def linear_step(bs: int) -> None:
    a = torch.empty(bs, 1000)
    fixed = torch.empty(FIXED // 4)
    b = a * 2
    del a, b, fixed


def true_max(budget: int) -> int:
    return (budget - FIXED) // PER_SAMPLE


@pytest.mark.parametrize("budget", [10_000_000, 1_234_567, 50_000])
def test_fit_finds_the_exact_maximum_and_certifies_it(budget: int) -> None:
    r = find_batch_size(linear_step, device="cpu", budget=budget)
    assert r.batch_size == true_max(budget)
    assert r.certified and r.method == "fit"
    assert r.fit is not None and r.fit.r2 == 1.0
    assert r.fit.slope == pytest.approx(PER_SAMPLE) and r.fit.intercept == pytest.approx(FIXED)
    assert r.runs == 6  # warmup + 3 probes + verify + verify above
    assert r.trials[-1].batch_size == r.batch_size + 1 and not r.trials[-1].fits


def test_doubling_baseline_agrees_with_more_runs() -> None:
    budget = 10_000_000
    fit = find_batch_size(linear_step, device="cpu", budget=budget)
    base = find_batch_size(linear_step, device="cpu", budget=budget, method="doubling")
    assert base.batch_size == fit.batch_size == true_max(budget)
    assert base.certified and base.runs > 3 * fit.runs


def test_nonlinear_step_falls_back_to_search_and_stays_exact() -> None:
    # quadratic memory (attention-like): the line from small probes over-predicts
    def step(bs: int) -> None:
        torch.empty(bs * bs, 250)  # 1000 B * bs^2

    budget = 5_000_000
    r = find_batch_size(step, device="cpu", budget=budget)
    exact = int((budget / 1000) ** 0.5)
    assert r.batch_size == exact and r.certified
    assert r.method == "fit+search" and r.predicted is not None and r.predicted > exact


def test_real_oom_counts_as_not_fitting() -> None:
    def step(bs: int) -> None:
        if bs > 37:
            raise torch.OutOfMemoryError("CUDA out of memory")
        torch.empty(bs, 10)

    r = find_batch_size(step, device="cpu", budget=10**9, high=10_000)
    assert r.batch_size == 37 and r.certified
    assert any(t.peak is None and not t.fits for t in r.trials)


def test_multiple_of_and_high() -> None:
    r = find_batch_size(linear_step, device="cpu", budget=10_000_000, multiple_of=8)
    assert r.batch_size == true_max(10_000_000) // 8 * 8 and r.batch_size % 8 == 0
    capped = find_batch_size(linear_step, device="cpu", budget=10_000_000, high=100)
    assert capped.batch_size == 100 and capped.certified


def test_retained_state_is_charged_to_the_budget() -> None:
    kept: list[torch.Tensor] = []

    def step(bs: int) -> None:
        if not kept:
            kept.append(torch.empty(250_000))  # 1 MB of "optimizer state", once
        torch.empty(bs, 1000)

    r = find_batch_size(step, device="cpu", budget=2_000_000)
    assert r.batch_size == (2_000_000 - 1_000_000) // 4000


def test_nothing_fits() -> None:
    with pytest.raises(BudgetError, match="no batch size fits"):
        find_batch_size(linear_step, device="cpu", budget=1000)


def test_usage_errors() -> None:
    with pytest.raises(UsageError):
        find_batch_size(linear_step, device="cpu", budget=10**6, low=0)
    with pytest.raises(UsageError, match="low <= high"):
        find_batch_size(linear_step, device="cpu", budget=10**6, low=10, high=5)
    with pytest.raises(UsageError, match="method"):
        find_batch_size(linear_step, device="cpu", budget=10**6, method="guess")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not initialised"):
        find_batch_size(linear_step, device="cpu", budget=10**6, distributed=True)


def test_step_errors_propagate() -> None:
    def step(bs: int) -> None:
        raise KeyError("bug in step")

    with pytest.raises(KeyError):
        find_batch_size(step, device="cpu", budget=10**6)


def test_fit_line_and_record_roundtrip() -> None:
    f = fit_line([(2, 100), (4, 200), (8, 400)])
    assert f.slope == pytest.approx(50) and f.intercept == pytest.approx(0) and f.r2 == 1.0
    assert f.solve(1000) == pytest.approx(20)
    r = find_batch_size(linear_step, device="cpu", budget=100_000)
    again = type(r).from_dict(r.to_dict())
    assert again == r


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, port: int, results: dict[int, tuple[int, int]]) -> None:
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        budget = 10_000_000 if rank == 0 else 4_000_000  # rank 1 has less memory
        r = find_batch_size(linear_step, device="cpu", budget=budget)
        results[rank] = (r.local_batch_size, r.batch_size)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_ranks_agree_on_the_minimum() -> None:
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(_rank_main, args=(_free_port(), results), nprocs=2, join=True)
    lows = {0: true_max(10_000_000), 1: true_max(4_000_000)}
    assert dict(results) == {r: (lows[r], lows[1]) for r in (0, 1)}


def test_public_name() -> None:
    assert torchmem.find_batch_size is find_batch_size
