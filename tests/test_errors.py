"""``torchmem.errors.is_oom``: the one test for "ran out of memory", shared by the doctor,
``torchmem.chunked`` and ``torchmem.find_batch_size``."""

from __future__ import annotations

import pytest
import torch

import torchmem
from torchmem.errors import BudgetError, is_oom


def _real_cpu_oom() -> RuntimeError:
    """What torch really raises when the CPU allocator fails (2**62 bytes: refused
    by the allocator without touching memory)."""
    with pytest.raises(RuntimeError) as info:
        torch.empty(2**62, dtype=torch.uint8)
    return info.value


def test_real_cpu_oom_is_oom() -> None:
    exc = _real_cpu_oom()
    assert "DefaultCPUAllocator: can't allocate memory" in str(exc)
    assert type(exc) is RuntimeError  # not torch.OutOfMemoryError: only the message says so
    assert is_oom(exc)


@pytest.mark.parametrize("exc, expected", [
    (MemoryError("host"), True),
    (BudgetError("does not fit"), True),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
    (RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"), True),
    (RuntimeError("XPU out of memory. Tried to allocate 1 GiB"), True),
    (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)"),
     True),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), False),
    (ValueError("out of memory"), False),  # only torch's RuntimeErrors are read
    (KeyboardInterrupt(), False),
])
def test_is_oom(exc: BaseException, expected: bool) -> None:
    assert is_oom(exc) is expected


def test_an_exception_whose_str_fails_is_not_oom() -> None:
    class Weird(RuntimeError):
        def __str__(self) -> str:
            raise ValueError("no str")

    assert is_oom(Weird()) is False


class _CpuOom:
    """fn that really runs out of CPU memory above ``limit`` rows."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.calls: list[int] = []

    def __call__(self, a: torch.Tensor) -> torch.Tensor:
        self.calls.append(a.shape[0])
        if a.shape[0] > self.limit:
            torch.empty(2**62, dtype=torch.uint8)
        return a * 2


def test_chunked_backs_off_on_a_real_cpu_oom() -> None:
    x = torch.arange(400 * 4, dtype=torch.float32).reshape(400, 4)
    fn = _CpuOom(60)
    out, report = torchmem.chunked(fn, x, 256, with_report=True)
    assert torch.equal(out, x * 2)
    assert fn.calls[:3] == [256, 128, 64]
    assert report.backoffs >= 2


def test_find_batch_size_backs_off_on_a_real_cpu_oom() -> None:
    def step(batch: int) -> None:
        if batch > 40:
            torch.empty(2**62, dtype=torch.uint8)
        torch.ones(batch, 16).sum()

    result = torchmem.find_batch_size(step, device="cpu", budget="1 GiB", high=64,
                                      method="doubling", warmup=False)
    assert result.batch_size == 40
