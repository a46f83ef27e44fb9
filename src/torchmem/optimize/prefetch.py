"""``torchmem.prefetch``: keep the next batches ready while the current one is used.

A background thread pulls batches from your iterable while your loop computes. With
``depth=2`` (double buffering) one batch is in use and one is being prepared; with
``depth=3`` (triple buffering) two are prepared ahead, which absorbs jitter in load
times. At most ``depth`` batches exist at once (the one you hold included): the thread
waits for a free slot before it asks the source for the next batch.

On CUDA the thread also moves each batch to the device: it pins the host tensors if they
are not pinned (in the thread, off your loop), issues ``to(device, non_blocking=True)``
on a side stream, and records an event. When the batch is handed to you, your current
stream waits for that event on the device (the host does not block) and every device
tensor gets ``record_stream`` for your stream, so the caching allocator does not reuse
its memory for the side stream while your kernels still read it. The seed's
double-buffered loader skips both steps: it is correct only by luck.

Example:
    >>> for x, y in torchmem.prefetch(loader, "cuda", depth=2):
    ...     loss = model(x).loss(y)

Known limitations:
    * Threads overlap only while the producer releases the GIL (file and socket I/O,
      ``time.sleep``, torch ops, decompression in C). A producer that is pure Python
      computation cannot overlap on CPython; use ``DataLoader(num_workers=...)``
      (processes), optionally wrapped in ``prefetch`` for the device transfer.
    * Batches are used as produced; tensors are not copied on CPU targets.
    * Closing early cannot interrupt a source blocked inside ``next()``; the thread
      ends as soon as that call returns (it is a daemon thread).
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, Generic, TypeVar

import torch

from torchmem._calls import target_device
from torchmem.collect.readings import DeviceLike
from torchmem.errors import UsageError
from torchmem.optimize._tree import iter_tensors, map_tensors

__all__ = ["prefetch", "Prefetcher"]

T = TypeVar("T")

_DONE = object()
_THREAD_NAME = "torchmem-prefetch"


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class _Shared:
    """State shared by the consumer and the producer thread. It holds no reference to
    the :class:`Prefetcher`, so dropping the prefetcher lets it be collected."""

    def __init__(self, depth: int) -> None:
        self.ready: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.slots = threading.Semaphore(depth)
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def shutdown(self) -> None:
        self.stop.set()
        self.slots.release()  # wake a producer waiting for a slot
        while True:  # drop prepared batches now rather than when the thread ends
            try:
                self.ready.get_nowait()
            except queue.Empty:
                break


class _Transfer:
    """Moves a batch to a CUDA device from a side stream (producer side)."""

    def __init__(self, device: torch.device, pin: bool, non_blocking: bool) -> None:
        self.device = device
        self.pin = pin
        self.non_blocking = non_blocking
        self.stream = torch.cuda.Stream(device)

    def __call__(self, batch: Any) -> tuple[Any, Any]:
        def move(t: torch.Tensor) -> torch.Tensor:
            if t.device.type == "cpu" and self.pin and not t.is_pinned():
                t = t.pin_memory()
            return t.to(self.device, non_blocking=self.non_blocking)

        with torch.cuda.device(self.device), torch.cuda.stream(self.stream):
            moved = map_tensors(move, batch)
            event = torch.cuda.Event()
            event.record(self.stream)
        return moved, event

    def hand_over(self, moved: Any, event: Any) -> Any:
        """Consumer side: order the consumer's stream after the copy, and tell the
        allocator that the consumer's stream uses the memory."""
        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        for t in iter_tensors(moved):
            if t.device.type == "cuda":
                t.record_stream(current)
        return moved


def _produce(
    source: Iterator[Any], shared: _Shared, transfer: _Transfer | None
) -> None:
    try:
        while True:
            shared.slots.acquire()
            if shared.stop.is_set():
                return
            try:
                batch = next(source)
            except StopIteration:
                shared.ready.put(_DONE)
                return
            item = transfer(batch) if transfer is not None else (batch, None)
            del batch
            if shared.stop.is_set():
                return
            shared.ready.put(item)
            del item
    except BaseException as exc:  # surfaces in the consumer, with its traceback
        shared.ready.put(_Failure(exc))
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # pragma: no cover - a source's close() failing
                pass


def _finalize(shared: _Shared) -> None:
    shared.shutdown()


class Prefetcher(Generic[T]):
    """Iterator returned by :func:`torchmem.prefetch`; also a context manager.

    Attributes:
        depth: batches alive at once, the one being used included.
        device: the target device, or ``None`` when batches are not moved.
    """

    def __init__(
        self,
        iterable: Iterable[T],
        device: DeviceLike = None,
        depth: int = 2,
        *,
        pin_memory: bool | None = None,
        non_blocking: bool = True,
    ) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 2:
            raise UsageError(
                f"torchmem.prefetch: depth counts the batches alive at once; expected "
                f"an int >= 2 (2 = double, 3 = triple buffering), got {depth!r}",
                tip="use depth=2 or depth=3",
            )
        self.depth = depth
        self.device = None if device is None else target_device(
            device, "prefetch",
            tip="prefetch() without a device still loads ahead, on the CPU; pass "
            "device='cuda' only where torch.cuda.is_available() is True",
        )
        transfer = None
        if self.device is not None and self.device.startswith("cuda"):
            pin = True if pin_memory is None else pin_memory
            transfer = _Transfer(torch.device(self.device), pin, non_blocking)
        self._transfer = transfer
        self._shared = _Shared(depth)
        self._holding = False
        self._finished = False
        source = iter(iterable)
        thread = threading.Thread(
            target=_produce, args=(source, self._shared, transfer), name=_THREAD_NAME,
            daemon=True,
        )
        self._shared.thread = thread
        self._finalizer = weakref.finalize(self, _finalize, self._shared)
        thread.start()

    def __iter__(self) -> Prefetcher[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        shared = self._shared
        if self._holding:  # the previous batch is done with: free its slot
            self._holding = False
            shared.slots.release()
        item = shared.ready.get()
        if item is _DONE:
            self._finish()
            raise StopIteration
        if isinstance(item, _Failure):
            self._finish()
            exc = item.exc
            del item
            raise exc
        self._holding = True
        batch, event = item
        del item
        if event is not None and self._transfer is not None:
            batch = self._transfer.hand_over(batch, event)
        return batch  # type: ignore[no-any-return]

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop the producer thread and drop the prepared batches.

        Args:
            timeout: seconds to wait for the thread to end (``None``: wait forever).
        """
        self._finish(timeout)

    def _finish(self, timeout: float | None = 5.0) -> None:
        self._finished = True
        self._finalizer()
        thread = self._shared.thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Whether the producer thread is still running."""
        thread = self._shared.thread
        return thread is not None and thread.is_alive()

    def __enter__(self) -> Prefetcher[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "finished" if self._finished else "running"
        return f"Prefetcher(depth={self.depth}, device={self.device!r}, {state})"


def prefetch(
    iterable: Iterable[T],
    device: DeviceLike = None,
    depth: int = 2,
    *,
    pin_memory: bool | None = None,
    non_blocking: bool = True,
) -> Prefetcher[T]:
    """Iterate over ``iterable`` with the next ``depth - 1`` batches prepared ahead.

    Args:
        iterable: batches: tensors, or tuples/lists/dicts/namedtuples/dataclasses of
            tensors (anything else passes through unchanged).
        device: move batches to this device. ``None`` or ``"cpu"``: no copy, only
            background loading. A CUDA device: pinned, asynchronous copies on a side
            stream (see the module docstring).
        depth: batches alive at once, the one you hold included: 2 = double
            buffering, 3 = triple buffering.
        pin_memory: pin host tensors before a CUDA copy (default: yes). Pinning happens
            in the background thread. Without it, ``non_blocking`` copies are
            synchronous for the thread (the data is staged by the driver).
        non_blocking: issue asynchronous copies (CUDA).

    Returns:
        A :class:`Prefetcher`: iterate over it; ``close()`` or ``with`` stops it early
        (dropping it, e.g. ``break`` out of a ``for`` loop, also stops the thread).

    Raises:
        UsageError: ``depth`` is not an int >= 2.
        DeviceError: unknown or unavailable device.
        Exception: whatever the source raised, re-raised in your loop with the
            source's traceback.

    Example:
        >>> batches = (load(i) for i in range(100))
        >>> for batch in torchmem.prefetch(batches, depth=3):
        ...     train_step(batch)
    """
    return Prefetcher(iterable, device, depth, pin_memory=pin_memory, non_blocking=non_blocking)


def _active_threads() -> list[threading.Thread]:
    """Producer threads still running (for tests and diagnostics)."""
    return [t for t in threading.enumerate() if t.name == _THREAD_NAME and t.is_alive()]
