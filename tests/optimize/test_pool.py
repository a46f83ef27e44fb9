"""BufferPool: reuse, exclusivity, exact bytes, fences, bounds."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import torchmem
from torchmem.errors import UsageError
from torchmem.optimize.pool import BufferPool


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def test_concurrent_users_never_share_a_buffer() -> None:
    pool = BufferPool("cpu")
    a = pool.acquire((16, 16), torch.float32)
    b = pool.acquire((16, 16), torch.float32)
    assert _ptr(a) != _ptr(b)
    pool.release(a)
    c = pool.acquire((16, 16), torch.float32)  # reuses a, never b (still lent)
    assert _ptr(c) == _ptr(a) and _ptr(c) != _ptr(b)
    s = pool.stats
    assert (s.hits, s.misses, s.buffers_lent, s.buffers_free) == (1, 2, 2, 0)
    assert s.bytes_held == 2 * 16 * 16 * 4


def test_key_is_shape_dtype_device() -> None:
    pool = BufferPool("cpu")
    with pool.borrow((4, 8), torch.float32) as x:
        ptr = _ptr(x)
    with pool.borrow((8, 4), torch.float32) as y:  # other shape: new buffer
        assert _ptr(y) != ptr
    with pool.borrow((4, 8), torch.float64) as z:  # other dtype: new buffer
        assert z.dtype == torch.float64 and _ptr(z) != ptr
    with pool.borrow([4, 8], torch.float32) as w:  # list shape: same key
        assert _ptr(w) == ptr and w.shape == (4, 8) and w.dtype == torch.float32
    assert pool.stats.hits == 1 and pool.stats.misses == 3
    # exact bytes: 4*8*4 + 8*4*4 + 4*8*8
    assert pool.stats.bytes_free == 128 + 128 + 256


def test_borrow_releases_on_error_and_zero_fills() -> None:
    pool = BufferPool("cpu")
    with pytest.raises(KeyError):
        with pool.borrow(10, torch.int64) as buf:
            buf.fill_(7)
            raise KeyError("x")
    assert pool.stats.buffers_lent == 0 and pool.stats.buffers_free == 1
    with pool.borrow(10, torch.int64, zero=True) as again:
        assert torch.equal(again, torch.zeros(10, dtype=torch.int64))


def test_threads_never_get_the_same_buffer() -> None:
    pool = BufferPool("cpu")
    clashes: list[int] = []
    in_use: set[int] = set()
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(200):
            with pool.borrow((32,), torch.float32) as buf:
                ptr = _ptr(buf)
                with lock:
                    if ptr in in_use:
                        clashes.append(ptr)
                    in_use.add(ptr)
                time.sleep(0)
                with lock:
                    in_use.discard(ptr)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clashes == []
    s = pool.stats
    assert s.hits + s.misses == 800 and s.misses <= 4 and s.buffers_lent == 0


def test_release_errors() -> None:
    pool = BufferPool("cpu")
    buf = pool.acquire((4,), torch.float32)
    with pytest.raises(UsageError, match="not lent by this pool"):
        pool.release(buf[:2])  # a view
    with pytest.raises(UsageError):
        pool.release(torch.empty(4))
    pool.release(buf)
    with pytest.raises(UsageError):
        pool.release(buf)  # twice
    with pytest.raises(UsageError, match="shape"):
        pool.acquire((-1, 2))
    with pytest.raises(UsageError, match="max_bytes"):
        BufferPool("cpu", max_bytes=-1)


def test_max_bytes_evicts_least_recently_released() -> None:
    pool = BufferPool("cpu", max_bytes=1000)
    a = pool.acquire((100,), torch.float32)  # 400 B
    b = pool.acquire((101,), torch.float32)  # 404 B
    c = pool.acquire((102,), torch.float32)  # 408 B
    pc = _ptr(c)
    pool.release(a)
    pool.release(b)
    pool.release(c)  # 1212 B free > 1000: a (oldest) goes
    s = pool.stats
    assert s.evictions == 1 and s.bytes_free == 404 + 408
    assert _ptr(pool.acquire((102,), torch.float32)) == pc
    assert pool.stats.hits == 1
    pool.acquire((100,), torch.float32)  # a was evicted: a miss
    assert pool.stats.misses == 4
    assert pool.clear() == 404 and pool.stats.bytes_free == 0


def test_pool_frees_its_memory_when_cleared() -> None:
    with torchmem.track("cpu") as t:
        pool = BufferPool("cpu")
        buf = pool.acquire((1024,), torch.float32)
        pool.release(buf)
        del buf
        held = t.delta
        assert pool.clear() == 4096
        after = t.delta
    assert (held, after) == (4096, 0)


class _Fence:
    """A completion fence set by another thread (what a CUDA event is to a stream)."""

    def __init__(self) -> None:
        self.done = threading.Event()

    def query(self) -> bool:
        return self.done.is_set()

    def synchronize(self) -> None:
        self.done.wait()


def test_busy_buffer_is_reused_last_and_only_after_its_fence() -> None:
    pool = BufferPool("cpu")
    busy = pool.acquire((8,), torch.float32)
    idle = pool.acquire((8,), torch.float32)
    fence = _Fence()
    pool.release(busy, event=fence)
    pool.release(idle)
    # A ready buffer is preferred over one a "stream" still uses.
    first = pool.acquire((8,), torch.float32)
    assert _ptr(first) == _ptr(idle) and pool.stats.waits == 0
    # Only the busy one is left: acquire blocks (host buffer) until its fence completes.
    timer = threading.Timer(0.2, fence.done.set)
    started = time.perf_counter()
    timer.start()
    second = pool.acquire((8,), torch.float32)
    waited = time.perf_counter() - started
    assert _ptr(second) == _ptr(busy)
    assert fence.query() and waited >= 0.15
    assert pool.stats.waits == 1


def test_public_name() -> None:
    assert torchmem.BufferPool is BufferPool


@pytest.mark.cuda
def test_cuda_release_records_event_and_reuse_waits_on_stream() -> None:
    pool = BufferPool("cuda")
    side = torch.cuda.Stream()
    buf = pool.acquire((1 << 20,), torch.float32)
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keep the side stream busy
        buf.fill_(1.0)
    pool.release(buf, streams=[side])
    again = pool.acquire((1 << 20,), torch.float32)  # device-side wait, host goes on
    assert _ptr(again) == _ptr(buf) and pool.stats.waits == 1
    again.add_(1.0)  # ordered after the side stream's fill by wait_event
    torch.cuda.synchronize()
    assert torch.all(again == 2.0)
    pool.release(again)


@pytest.mark.cuda
def test_cuda_pinned_host_buffers() -> None:
    pool = BufferPool("cpu", pin_memory=True)
    with pool.borrow((256,), torch.float32) as buf:
        assert buf.is_pinned()
        dev = buf.cuda(non_blocking=True)
    torch.cuda.synchronize()
    assert dev.shape == (256,)
