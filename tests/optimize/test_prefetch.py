"""prefetch: order, completeness, bounded depth, overlap, errors, early exit."""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
import weakref
from collections import namedtuple
from collections.abc import Iterator

import pytest
import torch

import torchmem
from torchmem.errors import UsageError
from torchmem.optimize.prefetch import _active_threads, prefetch


def _wait_no_threads(timeout: float = 5.0) -> list[threading.Thread]:
    deadline = time.monotonic() + timeout
    while _active_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    return _active_threads()


def test_order_and_completeness() -> None:
    source = [torch.full((3,), i) for i in range(50)]
    got = list(prefetch(source, depth=3))
    assert len(got) == 50
    assert all(g is s for g, s in zip(got, source))  # CPU: the same tensors, no copy
    assert _wait_no_threads() == []


def test_empty_source() -> None:
    assert list(prefetch([])) == []
    assert _wait_no_threads() == []


Pair = namedtuple("Pair", "x y")


@dataclasses.dataclass(frozen=True)
class Sample:
    image: torch.Tensor
    label: int


def test_nested_batches_pass_through_with_their_types() -> None:
    batches = [
        (torch.ones(2), [torch.zeros(1)]),
        {"x": torch.ones(1), "meta": "a"},
        Pair(torch.ones(1), torch.zeros(1)),
        Sample(torch.ones(2), 3),
    ]
    got = list(prefetch(batches, device="cpu"))
    assert isinstance(got[0], tuple) and isinstance(got[0][1], list)
    assert got[1]["meta"] == "a"
    assert isinstance(got[2], Pair)
    assert isinstance(got[3], Sample) and got[3].label == 3


@pytest.mark.parametrize("depth", [2, 3])
def test_at_most_depth_batches_alive(depth: int) -> None:
    produced = 0
    consumed = 0
    most_ahead = 0
    lock = threading.Lock()

    def source() -> Iterator[int]:
        nonlocal produced, most_ahead
        for i in range(30):
            with lock:
                produced += 1
                most_ahead = max(most_ahead, produced - consumed)
            yield i

    for i in prefetch(source(), depth=depth):
        with lock:
            consumed += 1
        time.sleep(0.002)
        assert i == consumed - 1
    # the batch in use plus depth - 1 ready or in preparation
    assert most_ahead == depth


def test_overlaps_a_sleeping_producer() -> None:
    n, t_load, t_compute = 10, 0.03, 0.03

    def source() -> Iterator[int]:
        for i in range(n):
            time.sleep(t_load)
            yield i

    started = time.perf_counter()
    for _ in prefetch(source(), depth=2):
        time.sleep(t_compute)
    elapsed = time.perf_counter() - started
    serial = n * (t_load + t_compute)
    # ideal is (n + 1) * 0.03 = 0.33 s; serial is 0.6 s
    assert elapsed < 0.8 * serial, elapsed


class Boom(Exception):
    pass


def _failing_source() -> Iterator[int]:
    yield 0
    yield 1
    raise Boom("bad sample 2")


def test_producer_exception_surfaces_with_traceback() -> None:
    seen = []
    with pytest.raises(Boom, match="bad sample 2") as info:
        for i in prefetch(_failing_source()):
            seen.append(i)
    assert seen == [0, 1]
    names = [entry.name for entry in info.traceback]
    assert "_failing_source" in names  # the producer's frame is in the traceback
    assert _wait_no_threads() == []


def test_break_stops_thread_closes_source_and_frees_batches() -> None:
    closed = threading.Event()
    refs: list[weakref.ref[torch.Tensor]] = []

    def source() -> Iterator[torch.Tensor]:
        try:
            for i in range(1000):
                t = torch.full((1024,), float(i))
                refs.append(weakref.ref(t))
                yield t
        finally:
            closed.set()

    for i, batch in enumerate(prefetch(source(), depth=3)):
        if i == 2:
            break
    del batch
    assert _wait_no_threads() == []
    assert closed.wait(5.0)
    gc.collect()
    assert len(refs) <= 6  # bounded read-ahead, not the whole source
    assert all(r() is None for r in refs)  # nothing prefetched is kept alive


def test_garbage_collection_of_a_half_used_iterator_stops_thread() -> None:
    it = prefetch(iter(range(100)), depth=2)
    assert next(it) == 0 and it.alive
    del it
    gc.collect()
    assert _wait_no_threads() == []


def test_close_and_context_manager() -> None:
    with prefetch(range(100), depth=2) as it:
        assert next(it) == 0
    assert not it.alive
    assert list(it) == []
    it2 = prefetch(range(5))
    it2.close()
    assert not it2.alive


def test_blocked_slow_source_is_abandoned_after_close() -> None:
    release = threading.Event()

    def source() -> Iterator[int]:
        yield 0
        release.wait(5.0)
        yield 1

    it = prefetch(source())
    assert next(it) == 0
    it.close(timeout=0.05)  # the thread is inside next(source)
    release.set()
    assert _wait_no_threads() == []


def test_bad_depth() -> None:
    for depth in (1, 0, 2.5, True):
        with pytest.raises(UsageError, match="depth"):
            prefetch([], depth=depth)  # type: ignore[arg-type]


def test_public_name() -> None:
    assert torchmem.prefetch is prefetch


@pytest.mark.cuda
def test_cuda_transfer_pins_copies_and_records_stream() -> None:
    src = [(torch.full((1 << 16,), float(i)), {"y": torch.tensor([i])}) for i in range(8)]
    out = []
    for x, d in prefetch(src, "cuda", depth=3):
        assert x.is_cuda and d["y"].is_cuda
        out.append(float((x * 2).sum()))  # consumer stream reads after the copy
    assert out == [2.0 * i * (1 << 16) for i in range(8)]
    assert _wait_no_threads() == []


@pytest.mark.cuda
def test_cuda_memory_is_not_reused_while_consumer_reads() -> None:
    # Without record_stream the side stream could reuse a freed batch's block while the
    # consumer's kernels still read it; with it the results stay right under pressure.
    src = (torch.full((1 << 20,), float(i)) for i in range(20))
    total = 0.0
    for x in prefetch(src, "cuda", depth=2):
        torch.cuda._sleep(1_000_000)
        total += float(x[0])
    assert total == sum(range(20))
