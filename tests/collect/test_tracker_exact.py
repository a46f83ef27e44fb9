"""track(exact=True): exact live tensor bytes at the start, the end and the peak, frees of
storages that existed before the region included; checked against the census."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torchmem
from torchmem.collect import _ledger
from torchmem.collect._engine import engine
from torchmem.collect.cpu import heap_bytes
from torchmem.collect.tracker import _active_trackers

MiB = 1024**2


def _u8(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.uint8)


def _census() -> int:
    return int(torchmem.read("cpu", exact=True).tensor_bytes or 0)


@pytest.fixture(autouse=True)
def _clean_ledger() -> Any:
    engine.forget()
    yield
    assert torch._C._len_torch_dispatch_stack() == 0
    assert _active_trackers("cpu") == []
    engine.forget()
    assert engine.tracked == 0


def test_freeing_a_tensor_from_before_the_region_is_counted() -> None:
    a = _u8(8 * MiB)
    before = _census()
    with torchmem.track("cpu", exact=True) as t:
        del a
        b = _u8(8 * MiB)
    after = _census()
    assert t.baseline.tensor_bytes == before
    assert t.delta == 0 and t.peak_delta == 0
    assert t.peak == before  # the live bytes never exceeded the start
    assert t.current.tensor_bytes == after == before
    del b


def test_peak_is_the_live_bytes_at_the_highest_moment() -> None:
    a = _u8(4 * MiB)
    with torchmem.track("cpu", exact=True) as t:
        b = _u8(2 * MiB)  # start + 2
        del a  # start - 2
        c = _u8(5 * MiB)  # start + 3: the highest point
        del b, c  # start - 4
    assert t.peak_delta == 3 * MiB
    assert t.delta == -4 * MiB
    assert t.peak == t.baseline.tensor_bytes + 3 * MiB


def test_alloc_free_alloc_is_still_exactly_12_mib() -> None:
    with torchmem.track("cpu", exact=True) as t:
        a = _u8(4 * MiB)
        b = _u8(8 * MiB)
        del a
        c = _u8(2 * MiB)
    assert t.peak_delta == 12 * MiB and t.delta == 10 * MiB
    assert t.peak == t.baseline.tensor_bytes + 12 * MiB
    del b, c


def test_views_and_inplace_ops_of_old_tensors_allocate_nothing() -> None:
    x = torch.zeros(1000)
    with torchmem.track("cpu", exact=True) as t:
        v = x.view(10, 100)
        x.add_(1)
        v.mul_(2)
        s = x[::2]
        del x  # noqa: TMM302 - the views keep the storage alive: nothing is freed
    assert t.delta == 0 and t.peak_delta == 0
    del v
    with torchmem.track("cpu", exact=True) as t2:
        del s  # the last view: now the storage goes
    assert t2.delta == -4000


def test_created_and_freed_inside_leaves_no_delta() -> None:
    with torchmem.track("cpu", exact=True) as t:
        x = _u8(3 * MiB)
        del x
    assert t.delta == 0 and t.peak_delta == 3 * MiB


def test_no_tensor_is_kept_alive_by_the_ledger() -> None:
    old = _u8(MiB)
    old_ref = weakref.ref(old.untyped_storage())
    with torchmem.track("cpu", exact=True) as t:
        new = _u8(MiB)
        new_ref = weakref.ref(new.untyped_storage())
    del old, new
    assert old_ref() is None and new_ref() is None
    assert t.delta == MiB


def test_nested_exact_trackers_each_see_their_own_region() -> None:
    a = _u8(4 * MiB)
    with torchmem.track("cpu", exact=True) as outer:
        b = _u8(MiB)
        with torchmem.track("cpu", exact=True) as inner:
            del a
            c = _u8(2 * MiB)
        assert inner.delta == -2 * MiB and inner.peak_delta == 0
        d = _u8(8 * MiB)
        del d
    assert outer.delta == -MiB
    assert outer.peak_delta == MiB + 8 * MiB - 2 * MiB
    assert inner.baseline.tensor_bytes == outer.baseline.tensor_bytes + MiB
    del b, c


def test_exact_tracker_inside_a_plain_one_shifts_the_outer_baseline() -> None:
    a = _u8(4 * MiB)
    with torchmem.track("cpu") as outer:  # the first: no ledger yet
        b = _u8(MiB)
        with torchmem.track("cpu", exact=True) as inner:  # full census, mid-region
            del a
        c = _u8(2 * MiB)
    assert inner.delta == -4 * MiB
    # the outer tracker now also knows `a`: its figures stay relative to its own start
    assert outer.delta == MiB - 4 * MiB + 2 * MiB
    assert outer.peak_delta == MiB
    del b, c


def test_tensors_made_between_regions_are_found_by_the_next_one() -> None:
    with torchmem.track("cpu", exact=True):
        pass
    made_between = _u8(6 * MiB)  # no tracker saw it being created
    before = _census()
    with torchmem.track("cpu", exact=True) as t:
        del made_between
    assert t.baseline.tensor_bytes == before
    assert t.delta == -6 * MiB


def test_gradients_a_backward_outside_made_are_found() -> None:
    w = torch.randn(512, 512, requires_grad=True)
    with torchmem.track("cpu", exact=True):
        pass
    (w * 2).sum().backward()  # w.grad exists only in C++ until Python reads it
    before = _census()
    with torchmem.track("cpu", exact=True) as t:
        w.grad = None
    assert t.baseline.tensor_bytes == before
    assert t.delta == -512 * 512 * 4


def test_a_full_collection_between_regions_falls_back_to_a_full_scan() -> None:
    with torchmem.track("cpu", exact=True):
        pass
    x = _u8(2 * MiB)
    gc.collect()  # promotes x's tensor to the oldest generation
    assert _ledger.sync(engine, "cpu") == "full"  # what the next tracker will do
    with torchmem.track("cpu", exact=True) as t:
        del x
    assert t.delta == -2 * MiB


@pytest.mark.skipif(not _ledger.young_scans(), reason="needs CPython's generational gc")
def test_back_to_back_exact_trackers_scan_only_young_objects() -> None:
    gc.disable()  # no collection may run in between (it would rightly force a full scan)
    try:
        with torchmem.track("cpu", exact=True):
            pass
        x = _u8(MiB)
        assert _ledger.sync(engine, "cpu") == "young"
        _ledger.ended(engine, "cpu")
        with torchmem.track("cpu", exact=True) as t:
            del x
    finally:
        gc.enable()
    assert t.delta == -MiB


def test_resize_outside_a_region_is_caught_before_the_free() -> None:
    x = torch.empty(10)
    with torchmem.track("cpu", exact=True):
        pass
    x.resize_(1000)  # same storage object, reallocated to 4000 bytes
    with torchmem.track("cpu", exact=True) as t:
        del x
    assert t.delta == -4000


class _HeapPeak(TorchDispatchMode):
    """Reference: the glibc heap after every aten op (frees only lower it)."""

    def __init__(self) -> None:
        super().__init__()
        self.high = heap_bytes() or 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.high = max(self.high, heap_bytes() or 0)
        return out


@pytest.mark.skipif(heap_bytes() is None, reason="needs glibc's mallinfo2")
def test_training_step_with_zero_grad_is_steady_and_its_peak_matches_the_heap() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024)

    def step() -> None:
        opt.zero_grad(set_to_none=True)  # frees the previous step's gradients
        model(x).square().mean().backward()
        opt.step()

    for _ in range(2):  # warm-up: Adam's state exists from now on
        step()
    for _ in range(3):
        heap0 = heap_bytes() or 0
        with torchmem.track("cpu", exact=True) as t:
            with _HeapPeak() as ref:
                step()
        # zero_grad's frees of gradients made before the region are subtracted
        assert t.delta == 0
        grads = sum(p.grad.untyped_storage().nbytes() for p in model.parameters())
        assert t.peak_delta >= 256 * 1024 * 4 * 2  # activations on top of the old grads
        # the heap saw the same highest moment, to within its non-tensor noise
        assert abs(t.peak_delta - (ref.high - heap0)) < 256 * 1024, (t.peak_delta, ref.high - heap0)
        assert t.current.tensor_bytes == _census()
        assert grads > 0


def test_a_failing_scan_warns_and_the_region_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(engine: Any, dev: str) -> str:
        raise RuntimeError("cannot list")

    monkeypatch.setattr(_ledger, "sync", broken)
    with pytest.warns(RuntimeWarning, match="could not list the live tensors"):
        with torchmem.track("cpu", exact=True) as t:
            x = _u8(MiB)
    assert t.delta == MiB and t.baseline.tensor_bytes is None
    del x


def test_baseline_matches_the_census_with_sparse_and_frozen_parameters() -> None:
    sparse = torch.sparse_coo_tensor(
        torch.tensor([[0, 5]]), torch.ones(2), (10,), check_invariants=True
    )
    frozen = torch.nn.Linear(64, 64)
    frozen(torch.randn(2, 64)).sum().backward()
    frozen.requires_grad_(False)  # the stale .grad stays alive
    before = _census()
    with torchmem.track("cpu", exact=True) as t:
        pass
    assert t.baseline.tensor_bytes == before
    del sparse, frozen
