"""Monitor: non-blocking start/stop, ring buffer with a kept peak, step tagging, Timeline."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import torchmem
from torchmem.collect import cpu
from torchmem.errors import UsageError
from torchmem.model.timeline import Sample, Timeline

MiB = 1024**2
needs_heap = pytest.mark.skipif(not cpu.heap_available(), reason="glibc mallinfo2 not available")


def _monitor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "torchmem-monitor"]


def test_start_and_stop_do_not_block_even_with_a_long_interval() -> None:
    m = torchmem.Monitor(interval=30.0, device="cpu")
    t0 = time.perf_counter()
    m.start()
    assert m.running and time.perf_counter() - t0 < 1.0
    t1 = time.perf_counter()
    timeline = m.stop()
    assert time.perf_counter() - t1 < 1.0  # the sampler wakes at once
    assert not m.running and _monitor_threads() == []
    assert len(timeline) == 2  # first and last sample
    assert timeline.stopped is not None and timeline.device == "cpu"
    assert m.stop() == timeline  # idempotent


def test_samples_arrive_periodically_in_time_order() -> None:
    with torchmem.Monitor(interval=0.01, device="cpu") as m:
        time.sleep(0.3)
    samples = m.timeline.samples
    assert len(samples) >= 5
    times = [s.time for s in samples]
    assert times == sorted(times)
    assert all(s.reading.device == "cpu" and s.used is not None for s in samples)
    assert m.error is None
    # the sampler's own CPU time: positive, and far below the wall time it ran
    assert 0.0 < m.sampler_cpu < 0.3


@needs_heap
def test_ring_buffer_drops_old_samples_but_keeps_the_peak() -> None:
    m = torchmem.Monitor(interval=30.0, device="cpu", capacity=3).start()
    base = m.timeline.samples[0].used
    big = torch.empty(64 * MiB, dtype=torch.uint8)
    m.step(0)  # boundary sample with the 64 MiB alive
    del big
    for i in range(1, 5):
        m.step(i)
    timeline = m.stop()
    assert len(timeline) == 3
    assert timeline.dropped == 7 - 3  # start + 5 steps + stop = 7 samples
    assert timeline.peak is not None and timeline.peak.step == 0
    # heap_bytes also moves with other C allocations: tens of KiB of noise
    assert abs(timeline.peak_used - base - 64 * MiB) < 256 * 1024  # type: ignore[operator]
    assert all(s.used < timeline.peak_used for s in timeline.samples)  # type: ignore[operator]


@needs_heap
def test_step_boundaries_give_exact_growth_per_step() -> None:
    kept = []
    with torchmem.Monitor(interval=30.0, device="cpu") as m:
        for i in range(4):
            assert m.step() == i
            kept.append(torch.empty(8 * MiB, dtype=torch.uint8))
    per_step = m.timeline.per_step("boundary")
    assert list(per_step) == [0, 1, 2, 3]
    for a, b in zip(list(per_step.values()), list(per_step.values())[1:]):
        assert abs(b - a - 8 * MiB) < 256 * 1024
    assert m.timeline.steps() == [0, 1, 2, 3]
    assert m.timeline.per_step("max")[3] >= per_step[3]
    del kept


def test_explicit_step_indices_tag_the_following_samples() -> None:
    m = torchmem.Monitor(interval=30.0, device="cpu").start()
    m.step(10)
    m.step(20, sample=False)
    timeline = m.stop()
    assert [s.step for s in timeline.samples] == [None, 10, 20]
    assert [s.boundary for s in timeline.samples] == [False, True, False]


def test_interval_none_samples_only_at_boundaries_without_a_thread() -> None:
    m = torchmem.Monitor(interval=None, device="cpu").start()
    assert _monitor_threads() == [] and m.running
    for i in range(3):
        m.step(i)
    time.sleep(0.05)
    timeline = m.stop()
    assert [s.step for s in timeline.samples] == [None, 0, 1, 2, 2]
    assert timeline.interval is None
    assert Timeline.from_dict(timeline.to_dict()) == timeline


def test_timeline_round_trips_through_json_dict() -> None:
    with torchmem.Monitor(interval=0.01, device="cpu") as m:
        m.step(0)
        time.sleep(0.03)
    timeline = m.timeline
    again = Timeline.from_dict(timeline.to_dict())
    assert again == timeline
    assert isinstance(again.samples[0], Sample) and again.duration >= 0.0


def test_timeline_snapshot_while_running() -> None:
    m = torchmem.Monitor(interval=30.0, device="cpu").start()
    snap = m.timeline
    assert snap.stopped is None and len(snap) == 1
    m.stop()


def test_per_step_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="boundary"):
        Timeline(device="cpu", interval=1.0, capacity=1).per_step("median")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"interval": 0}, "interval"), ({"interval": -1}, "interval"),
     ({"interval": True}, "interval"),
     ({"interval": "fast"}, "interval"), ({"capacity": 0}, "capacity"),
     ({"capacity": 2.5}, "capacity")],
)
def test_bad_arguments_are_usage_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        torchmem.Monitor(device="cpu", **kwargs)


def test_lifecycle_misuse_is_a_usage_error() -> None:
    m = torchmem.Monitor(device="cpu")
    with pytest.raises(UsageError, match="before start"):
        m.stop()
    m.start()
    with pytest.raises(UsageError, match="twice"):
        m.start()
    m.stop()


@pytest.mark.cuda
def test_cuda_monitor_sees_the_allocator() -> None:
    torch.empty(1, device="cuda")
    with torchmem.Monitor(interval=30.0, device="cuda:0") as m:
        m.step(0)
        x = torch.empty(16 * MiB, dtype=torch.uint8, device="cuda:0")
        m.step(1)
    per_step = m.timeline.per_step("boundary")
    assert per_step[1] - per_step[0] == 16 * MiB
    del x
