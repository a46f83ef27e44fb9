"""torchmem.cleanup / every: what the garbage collector frees, counted exactly."""

from __future__ import annotations

import gc

import pytest
import torch

import torchmem
from torchmem.collect.cpu import heap_available
from torchmem.errors import UsageError
from torchmem.model.scope import CleanupReport

MIB = 1 << 20


class _Cycle:
    def __init__(self) -> None:
        self.me = self
        self.t = torch.ones(MIB // 4)  # 1 MiB


@pytest.mark.usefixtures("no_gc")
def test_cleanup_frees_tensors_trapped_in_cycles() -> None:
    for _ in range(3):
        _Cycle()
    r = torchmem.cleanup()
    assert r.collected >= 3 * 2  # each cycle: the object and its __dict__
    assert r.seconds >= r.gc_seconds > 0
    if heap_available():
        assert 3 * MIB <= r.heap_freed < 3 * MIB + MIB // 2  # type: ignore[operator]
    assert r.device is None  # no accelerator in use on a CPU run
    assert CleanupReport.from_dict(r.to_dict()) == r


@pytest.mark.usefixtures("no_gc")
def test_every_runs_cleanup_after_every_nth_item() -> None:
    seen: list[CleanupReport] = []
    loop = torchmem.every(range(10), n=4, on_cleanup=seen.append)
    assert len(loop) == 10
    items = []
    for i in loop:
        _Cycle()
        items.append(i)
        # the cleanup for item 4 runs after its body, when the next item is asked for
        assert loop.cleanups == i // 4
    assert items == list(range(10))
    assert loop.cleanups == 2 and len(seen) == 2 and loop.last is seen[-1]
    if heap_available():
        assert all(r.heap_freed >= 4 * MIB for r in seen)  # type: ignore[operator]
    gc.collect()


def test_callback_form() -> None:
    tick = torchmem.every(n=3)
    results = [tick() for _ in range(7)]
    assert [r is not None for r in results] == [False, False, True, False, False, True, False]
    assert tick.steps == 7 and tick.cleanups == 2


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_every_rejects_bad_n(n: object) -> None:
    with pytest.raises(UsageError, match="positive integer"):
        torchmem.every([1], n=n)  # type: ignore[arg-type]


@pytest.mark.cuda
def test_cleanup_releases_cuda_cache() -> None:
    x = torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
    cyc = _Cycle()
    cyc.t = x
    del x, cyc
    r = torchmem.cleanup()
    assert r.device is not None and r.device.startswith("cuda")
    assert r.device_freed is not None and r.device_freed >= 64 * MIB
    assert r.cache_released is not None and r.cache_released >= 64 * MIB
