"""chunked: exact results, OOM back-off through a budget and real OOM errors."""

from __future__ import annotations

import pytest
import torch

import torchmem
from torchmem.errors import BudgetError, UsageError
from torchmem.optimize.chunked import _State, chunked


def _x(n: int = 1000, d: int = 64) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(0))


def test_result_equals_unchunked_exactly() -> None:
    x = _x()
    fn = lambda a: torch.tanh(a) * 3 + a.softmax(-1)  # noqa: E731
    for size in (1, 7, 128, 1000, 5000):
        assert torch.equal(chunked(fn, x, size), fn(x))


def test_multiple_inputs_and_outputs() -> None:
    x, y = _x(), _x() + 1
    out = chunked(lambda a, b, k: (a + b * k, (a * b).sum(-1)), (x, y, 2.0), 33)
    assert isinstance(out, tuple)
    assert torch.equal(out[0], x + y * 2.0) and torch.equal(out[1], (x * y).sum(-1))


def test_writes_into_given_output_and_dtype() -> None:
    x = _x(100)
    target = torch.empty(100, 64, dtype=torch.float64)
    got = chunked(lambda a: a * 2, x, 10, out=target)
    assert got is target and torch.equal(target, (x * 2).double())


def test_budget_sizes_chunks_from_a_measured_probe() -> None:
    # each row of softmax(x)*2 allocates 256 B (softmax) + 256 B (product) = 512 B
    x = _x(1000, 64)
    out, report = chunked(
        lambda a: a.softmax(-1) * 2, x, budget=64 * 1024, margin=0.1, with_report=True
    )
    assert torch.equal(out, x.softmax(-1) * 2)
    assert report.peak_per_item == 512.0
    assert report.initial_chunk == int(64 * 1024 * 0.9 / 512)  # 115
    assert report.chunk_sizes[0] == 16 and sum(report.chunk_sizes) == 1000
    assert report.backoffs == 0 and max(report.chunk_sizes) == 115


def test_budget_backs_off_and_grows_again() -> None:
    x = _x(1000, 64)
    out, report = chunked(
        lambda a: a.softmax(-1) * 2, x, 500, budget=100 * 1024, with_report=True
    )
    assert torch.equal(out, x.softmax(-1) * 2)
    # 500 and 250 rows need 256000 and 128000 B > 102400: two back-offs to 125
    assert report.chunk_sizes[:2] == (125, 125)
    assert report.backoffs >= 2
    assert max(report.chunk_sizes) * 512 <= 100 * 1024  # every kept chunk under budget
    assert max(report.chunk_sizes) > 125  # grew again after successes
    assert sum(report.chunk_sizes) == 1000


class _Oom:
    """fn that raises a real out-of-memory error above ``limit`` rows."""

    def __init__(self, limit: int, error: type[BaseException]) -> None:
        self.limit = limit
        self.error = error
        self.calls: list[int] = []

    def __call__(self, a: torch.Tensor) -> torch.Tensor:
        self.calls.append(a.shape[0])
        if a.shape[0] > self.limit:
            if self.error is MemoryError:
                raise MemoryError("host out of memory")
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return a * 2


@pytest.mark.parametrize("error", [torch.OutOfMemoryError, MemoryError])
def test_real_oom_errors_halve_and_retry(error: type[BaseException]) -> None:
    x = _x(400, 8)
    fn = _Oom(60, error)
    out, report = chunked(fn, x, 256, with_report=True)
    assert torch.equal(out, x * 2)
    assert fn.calls[:3] == [256, 128, 64]  # halved twice, then fits
    assert report.backoffs >= 2 and report.budget is None
    assert all(c <= 60 for c in report.chunk_sizes)


def test_oom_at_min_chunk_is_raised() -> None:
    with pytest.raises(torch.OutOfMemoryError):
        chunked(_Oom(0, torch.OutOfMemoryError), _x(10, 2), 4)
    with pytest.raises(BudgetError, match="do not fit the budget"):
        chunked(lambda a: a * 2, _x(10, 64), 4, budget=100)


def test_other_errors_propagate_unchanged() -> None:
    def fn(a: torch.Tensor) -> torch.Tensor:
        raise ValueError("user bug")

    with pytest.raises(ValueError, match="user bug"):
        chunked(fn, _x(10, 2), 4)


def test_state_never_grows_back_into_a_failed_size() -> None:
    s = _State(100, 1, grow_after=1)
    s.failed(100)
    assert s.size == 50
    s.succeeded(50)
    assert s.size == 75  # halfway to the failed 100, not 100
    s.failed(75)
    assert s.size == 50  # back to the largest size known to work
    s.succeeded(50)
    assert s.size == 62


def test_progress_callback() -> None:
    calls: list[tuple[int, int]] = []
    chunked(lambda a: a, _x(100, 2), 30, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(30, 100), (60, 100), (90, 100), (100, 100)]


def test_empty_input() -> None:
    out = chunked(lambda a: a * 2, torch.empty(0, 3), 4)
    assert out.shape == (0, 3)


def test_usage_errors() -> None:
    with pytest.raises(UsageError, match="chunk_size"):
        chunked(lambda a: a, _x(4, 2), 0)
    with pytest.raises(UsageError, match="first dimension"):
        chunked(lambda a, b: a, (_x(4, 2), _x(5, 2)), 2)
    with pytest.raises(UsageError, match="one row per input row"):
        chunked(lambda a: a.sum(0, keepdim=True), _x(4, 2), 2)
    with pytest.raises(UsageError, match="nothing to slice"):
        chunked(lambda a: a, [1, 2], 2)
    with pytest.raises(UsageError, match="budget"):
        chunked(lambda a: a, _x(4, 2), budget="lots")


def test_runs_without_autograd_graph() -> None:
    w = torch.randn(64, 64, requires_grad=True)
    out = chunked(lambda a: a @ w, _x(100, 64), 10)
    assert not out.requires_grad and out.grad_fn is None


def test_public_name() -> None:
    assert torchmem.chunked is chunked


@pytest.mark.cuda
def test_cuda_to_pinned_cpu_output() -> None:
    x = _x(1000, 64)
    out = chunked(lambda a: a * 2, x, 100, device="cuda", out_device="cpu", pin_memory=True)
    assert out.device.type == "cpu" and out.is_pinned()
    assert torch.equal(out, x * 2)
