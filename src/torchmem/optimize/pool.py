"""``torchmem.BufferPool``: reusable tensors keyed by (shape, dtype, device).

The seed pattern "preallocate a buffer and reuse it" is right for one fixed-size
buffer in one loop. A pool generalises it: buffers of any shape are lent out and taken
back, a buffer is never lent to two users at once, and on a GPU a buffer returned while
a stream may still read or write it is not reused too early.

Stream safety (CUDA): ``release`` records an event on the current stream (or on each of
``streams=``). ``acquire`` prefers a buffer whose event has completed. When only busy
buffers remain it still reuses one, but makes the new user wait without blocking the
host: a device buffer is guarded by ``stream.wait_event(event)`` on the acquiring
stream; a pinned host buffer, which the host itself will write, by
``event.synchronize()``. Both are counted in ``stats.waits``.

Example:
    >>> pool = torchmem.BufferPool("cpu")
    >>> with pool.borrow((64, 1024), torch.float32) as buf:
    ...     torch.matmul(a, b, out=buf)
    >>> pool.stats.misses, pool.stats.hits
    (1, 0)

Known limitations:
    * The pool cannot see references you keep after ``release``: keep none, or the
      next borrower writes into a tensor you still read.
    * Buffers are lent as they were left (garbage), unless ``zero=True``.
    * Buffers are plain tensors without autograd history; lending one to code that
      autograd saves for backward and then reusing it corrupts gradients (autograd's
      version counter raises on backward if you write into it in place).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from torchmem.collect.readings import DeviceLike, resolve_device
from torchmem.errors import UsageError
from torchmem.model.optimize import PoolStats

__all__ = ["BufferPool", "Fence"]

_Key = tuple[tuple[int, ...], torch.dtype, str]
_TIP = "see docs/throughput.md#bufferpool"


class Fence(Protocol):
    """What ``release(event=...)`` accepts: a ``torch.cuda.Event`` or anything with
    ``query()`` (done yet?) and ``synchronize()`` (block until done)."""

    def query(self) -> bool: ...
    def synchronize(self) -> None: ...


@dataclass
class _Entry:
    tensor: torch.Tensor
    key: _Key
    nbytes: int
    fences: list[Any] = field(default_factory=list)
    order: int = 0

    def ready(self) -> bool:
        return all(f.query() for f in self.fences)


class BufferPool:
    """Lend reusable tensors: ``with pool.borrow(shape, dtype) as buf:`` or
    ``acquire``/``release``.

    Args:
        device: default device of the buffers (see :func:`torchmem.read`).
        pin_memory: allocate CPU buffers in pinned (page-locked) memory, as sources or
            targets of asynchronous host-device copies. Needs an accelerator.
        max_bytes: most bytes of *free* buffers the pool keeps; releasing beyond it
            drops the least recently released ones. ``None``: no limit.

    Raises:
        DeviceError: unknown or unavailable device.
        UsageError: ``max_bytes`` is negative.

    Example:
        >>> pool = torchmem.BufferPool("cuda")
        >>> buf = pool.acquire((32, 4096), torch.float16)
        >>> ...  # use buf on the current stream
        >>> pool.release(buf)   # records an event; reuse waits for it
    """

    def __init__(
        self,
        device: DeviceLike = None,
        *,
        pin_memory: bool = False,
        max_bytes: int | None = None,
    ) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise UsageError(
                f"torchmem.BufferPool: max_bytes must not be negative; expected an "
                f"int >= 0 or None, got {max_bytes!r}",
                tip=_TIP,
            )
        self.device = resolve_device(device)
        self.pin_memory = pin_memory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._free: dict[_Key, list[_Entry]] = {}
        self._lent: dict[int, _Entry] = {}
        self._order = itertools.count()
        self._hits = self._misses = self._waits = self._evictions = 0

    # -- lending -------------------------------------------------------------------
    def acquire(
        self,
        shape: Sequence[int] | torch.Size | int,
        dtype: torch.dtype | None = None,
        device: DeviceLike = None,
        *,
        zero: bool = False,
        stream: Any = None,
    ) -> torch.Tensor:
        """Lend a tensor of exactly ``shape``/``dtype``/``device``.

        Args:
            shape: the tensor's shape.
            dtype: its dtype (``torch.get_default_dtype()`` when ``None``).
            device: its device (the pool's device when ``None``).
            zero: fill it with zeros before lending.
            stream: the CUDA stream that will use it (the current stream when
                ``None``); a reused device buffer still busy elsewhere is guarded by an
                event wait on this stream.

        Returns:
            A contiguous tensor nobody else holds from this pool until you release it.
        """
        key = self._key(shape, dtype, device)
        with self._lock:
            entry = self._take(key)
            if entry is None:
                self._misses += 1
            else:
                self._hits += 1
                if entry.fences and not entry.ready():
                    self._waits += 1
                    self._guard(entry, stream)
                entry.fences = []
        if entry is None:
            entry = self._allocate(key)
        with self._lock:
            self._lent[id(entry.tensor)] = entry
        if zero:
            entry.tensor.zero_()
        return entry.tensor

    def release(
        self,
        buffer: torch.Tensor,
        *,
        streams: Sequence[Any] | None = None,
        event: Fence | None = None,
    ) -> None:
        """Give a lent tensor back to the pool.

        Args:
            buffer: a tensor :meth:`acquire` returned (not a view of it).
            streams: CUDA streams that used the buffer; an event is recorded on each.
                ``None``: the current stream of the buffer's device (for a pinned host
                buffer, the current CUDA stream), when CUDA is initialised.
            event: a completion fence of your own (e.g. a ``torch.cuda.Event`` you
                recorded), used instead of recording one.

        Raises:
            UsageError: the tensor was not lent by this pool, or was released already.
        """
        with self._lock:
            entry = self._lent.pop(id(buffer), None)
        if entry is None or entry.tensor is not buffer:
            raise UsageError(
                "torchmem.BufferPool.release: this tensor is not lent by this pool; "
                "expected a tensor returned by acquire() and not yet released, got "
                f"a tensor of shape {tuple(buffer.shape)} ({buffer.dtype}, {buffer.device})",
                tip="release the tensor acquire() returned, once, not a view of it",
            )
        entry.fences = [event] if event is not None else self._record(entry, streams)
        with self._lock:
            entry.order = next(self._order)
            self._free.setdefault(entry.key, []).append(entry)
            self._trim()

    @contextlib.contextmanager
    def borrow(
        self,
        shape: Sequence[int] | torch.Size | int,
        dtype: torch.dtype | None = None,
        device: DeviceLike = None,
        *,
        zero: bool = False,
        stream: Any = None,
    ) -> Iterator[torch.Tensor]:
        """``with pool.borrow(shape, dtype) as buf:``: acquire, and release on exit (on
        error too). Arguments as in :meth:`acquire`."""
        buf = self.acquire(shape, dtype, device, zero=zero, stream=stream)
        try:
            yield buf
        finally:
            self.release(buf)

    # -- housekeeping --------------------------------------------------------------
    @property
    def stats(self) -> PoolStats:
        """Counters and bytes held now (a :class:`~torchmem.model.optimize.PoolStats`)."""
        with self._lock:
            free = [e for entries in self._free.values() for e in entries]
            bytes_free = sum(e.nbytes for e in free)
            bytes_lent = sum(e.nbytes for e in self._lent.values())
            return PoolStats(
                hits=self._hits,
                misses=self._misses,
                waits=self._waits,
                evictions=self._evictions,
                bytes_held=bytes_free + bytes_lent,
                bytes_free=bytes_free,
                buffers_free=len(free),
                buffers_lent=len(self._lent),
            )

    def clear(self) -> int:
        """Drop every free buffer (lent ones stay lent); returns the bytes dropped.

        Busy buffers are dropped too: the caching allocator keeps their memory until
        the streams that used them are done only if you passed those streams, so call
        ``clear`` after synchronising when in doubt.
        """
        with self._lock:
            dropped = sum(e.nbytes for entries in self._free.values() for e in entries)
            self._evictions += sum(len(v) for v in self._free.values())
            self._free.clear()
        return dropped

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"BufferPool(device={self.device!r}, hits={s.hits}, misses={s.misses}, "
            f"held={s.bytes_held}, lent={s.buffers_lent})"
        )

    # -- internals -----------------------------------------------------------------
    def _key(
        self, shape: Sequence[int] | torch.Size | int, dtype: torch.dtype | None, device: DeviceLike
    ) -> _Key:
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
            raise UsageError(
                f"torchmem.BufferPool: bad shape; expected a sequence of ints >= 0, "
                f"got {shape!r}",
                tip=_TIP,
            )
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise UsageError(
                f"torchmem.BufferPool: bad dtype; expected a torch.dtype, got {dtype!r}",
                tip=_TIP,
            )
        dev = self.device if device is None else resolve_device(device)
        return (dims, dtype or torch.get_default_dtype(), dev)

    def _take(self, key: _Key) -> _Entry | None:
        entries = self._free.get(key)
        if not entries:
            return None
        # Prefer a buffer no stream is using; else the one released first.
        index = next((i for i, e in enumerate(entries) if e.ready()), 0)
        entry = entries.pop(index)
        if not entries:
            del self._free[key]
        return entry

    def _allocate(self, key: _Key) -> _Entry:
        shape, dtype, dev = key
        pin = self.pin_memory and dev == "cpu"
        tensor = torch.empty(shape, dtype=dtype, device=dev, pin_memory=pin)
        return _Entry(tensor, key, tensor.untyped_storage().nbytes())

    def _guard(self, entry: _Entry, stream: Any) -> None:
        """Make the new user wait for the fences of a busy buffer."""
        on_device = entry.tensor.device.type == "cuda"
        for fence in entry.fences:
            if on_device and isinstance(fence, torch.cuda.Event):
                target = stream or torch.cuda.current_stream(entry.tensor.device)
                target.wait_event(fence)  # device-side wait; the host goes on
            else:
                fence.synchronize()  # the host will write it: block until done

    def _record(self, entry: _Entry, streams: Sequence[Any] | None) -> list[Any]:
        dev = entry.tensor.device
        if streams is None:
            if dev.type == "cuda":
                streams = [torch.cuda.current_stream(dev)]
            elif entry.tensor.is_pinned() and torch.cuda.is_initialized():
                streams = [torch.cuda.current_stream()]
            else:
                return []
        fences = []
        for s in streams:
            event = torch.cuda.Event()
            event.record(s)
            fences.append(event)
        return fences

    def _trim(self) -> None:
        if self.max_bytes is None:
            return
        free = sorted(
            (e for entries in self._free.values() for e in entries), key=lambda e: e.order
        )
        total = sum(e.nbytes for e in free)
        for e in free:
            if total <= self.max_bytes:
                break
            self._free[e.key].remove(e)
            if not self._free[e.key]:
                del self._free[e.key]
            total -= e.nbytes
            self._evictions += 1
