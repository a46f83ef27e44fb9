"""torchmem.read(): device resolution, CPU figures checked against known tensors, CUDA counters."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

import torchmem
from torchmem.collect import cpu
from torchmem.collect.cuda import fields_from_flat, fields_from_nested
from torchmem.collect.readings import read, resolve_device
from torchmem.errors import DeviceError
from torchmem.model.readings import Reading

MiB = 1024**2


def test_cpu_reading_has_host_figures_and_no_accelerator_figures() -> None:
    before = time.time()
    r = read("cpu")
    assert r.device == "cpu"
    assert before <= r.time <= time.time()
    assert r.rss is not None and r.rss > 10 * MiB
    assert r.allocated is None and r.reserved is None and r.free is None
    assert r.tensor_bytes is None  # the expensive figure is opt-in
    if cpu.heap_available():
        assert r.heap is not None and 0 < r.heap < r.rss * 4
        assert r.used == r.heap and r.used_source == "heap"
    else:
        assert r.used == r.rss


@pytest.mark.skipif(not cpu.heap_available(), reason="glibc mallinfo2 not available")
def test_heap_sees_a_tensor_allocation_and_its_free_to_the_byte_range() -> None:
    base = cpu.heap_bytes()
    x = torch.empty(64 * MiB, dtype=torch.uint8)
    grown = cpu.heap_bytes() - base
    # the storage, give or take the KiB of other C allocations made meanwhile
    assert abs(grown - 64 * MiB) < 256 * 1024
    del x
    assert abs(cpu.heap_bytes() - base) < 256 * 1024


def test_rss_grows_when_pages_are_touched() -> None:
    base = cpu.rss_bytes()
    x = torch.ones(64 * MiB, dtype=torch.uint8)  # ones() writes every page
    assert cpu.rss_bytes() - base >= 48 * MiB
    del x


@pytest.mark.parametrize(
    ("arg", "expected"),
    [("cpu", "cpu"), ("cpu:0", "cpu"), (" cpu ", "cpu"), (torch.device("cpu"), "cpu")],
)
def test_resolve_device_accepts_cpu_spellings(arg: object, expected: str) -> None:
    assert resolve_device(arg) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["bogus", "cuda:x", "", "meta", 3.5, True, [0], -1])
def test_resolve_device_rejects_bad_input_with_a_tip(bad: object) -> None:
    with pytest.raises(DeviceError) as info:
        resolve_device(bad)  # type: ignore[arg-type]
    assert info.value.tip and "cpu" in info.value.tip
    assert "torchmem.read:" in info.value.message and "got" in info.value.message
    assert info.value.exit_code == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error path")
@pytest.mark.parametrize(
    "arg", ["cuda", "cuda:0", 0, torch.device("cuda", 1)], ids=["str", "indexed", "int", "device"]
)
def test_unavailable_cuda_is_a_device_error(arg: object) -> None:
    with pytest.raises(DeviceError, match="not available"):
        read(arg)  # type: ignore[arg-type]


def test_default_device_is_cpu_while_no_accelerator_is_initialised() -> None:
    code = (
        "import torch, torchmem\n"
        "r = torchmem.read()\n"
        "print(r.device, torch.cuda.is_initialized())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "False"]


def test_import_torchmem_does_not_import_torch() -> None:
    code = "import sys, torchmem; torchmem.Reading; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_reading_round_trips_through_json_dict() -> None:
    r = read("cpu")
    again = Reading.from_dict(r.to_dict())
    assert again == r
    assert torchmem.Reading is Reading


def test_used_picks_the_primary_figure_per_device() -> None:
    cuda = Reading(device="cuda:0", time=0.0, allocated=5, reserved=9, rss=100, heap=50)
    assert (cuda.used, cuda.used_source) == (5, "allocated")
    exact = Reading(device="cpu", time=0.0, rss=100, heap=50, tensor_bytes=7)
    assert (exact.used, exact.used_source) == (7, "tensor_bytes")
    assert Reading(device="cpu", time=0.0, rss=100).used == 100
    assert Reading(device="cpu", time=0.0).used is None
    assert cuda.diff(Reading(device="cuda:0", time=0.0, allocated=2)) == {"allocated": 3}
    assert list(cuda.figures()) == ["allocated", "reserved", "rss", "heap"]


def test_allocator_fields_from_nested_and_flat_stats() -> None:
    flat = {
        "allocated_bytes.all.current": 10,
        "allocated_bytes.all.peak": 30,
        "reserved_bytes.all.current": 40,
        "reserved_bytes.all.peak": 50,
        "active_bytes.all.current": 12,
        "inactive_split_bytes.all.current": 6,
        "num_alloc_retries": 2,
        "num_ooms": 1,
        "allocated_bytes.large_pool.current": 8,
    }
    fields = fields_from_flat(flat)
    assert fields == {
        "allocated": 10, "reserved": 40, "active": 12, "inactive_split": 6,
        "peak_allocated": 30, "peak_reserved": 50, "alloc_retries": 2, "num_ooms": 1,
    }
    # an allocator never used reports nothing: zeros for the byte counters
    assert fields_from_nested({})["allocated"] == 0
    # a back-end with fewer counters: missing figures are None, not 0
    assert fields_from_flat({"allocated_bytes.all.current": 3})["inactive_split"] is None


def test_exact_reading_counts_tensors_only_autograd_holds() -> None:
    pytest.importorskip("torchmem.collect.live")
    w = torch.randn(256, 256, requires_grad=True)
    base = read("cpu", exact=True).tensor_bytes
    assert base is not None
    # the intermediate exp() result is referenced only by the graph (saved for backward)
    loss = (w * 2).exp().sum()
    grown = read("cpu", exact=True).tensor_bytes - base  # type: ignore[operator]
    assert grown >= 256 * 256 * 4  # at least the saved activation
    del loss


@pytest.mark.cuda
def test_cuda_reading_counts_a_known_tensor_exactly() -> None:
    torch.cuda.init()
    torch.cuda.synchronize()
    before = read("cuda:0")
    x = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda:0")
    after = read("cuda:0")
    assert after.allocated - before.allocated == 8 * MiB  # type: ignore[operator]
    assert after.reserved >= after.allocated  # type: ignore[operator]
    assert after.free is not None and after.total is not None and after.free < after.total
    assert after.peak_allocated >= after.allocated  # type: ignore[operator]
    assert after.used == after.allocated and after.rss is not None
    del x
    assert read("cuda:0").allocated == before.allocated


@pytest.mark.cuda
def test_reading_cuda_never_initialises_it() -> None:
    code = (
        "import torch, torchmem\n"
        "d = torchmem.read().device\n"
        "r = torchmem.read('cuda')\n"
        "print(d, r.device, r.allocated, r.free, torch.cuda.is_initialized())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "cuda:0", "0", "None", "False"]


@pytest.mark.cuda
def test_default_device_follows_an_initialised_cuda() -> None:
    torch.empty(1, device="cuda")
    assert read().device == f"cuda:{torch.cuda.current_device()}"
    assert resolve_device(0) == "cuda:0"
