"""GC-driven disposal, measured: ``cleanup()`` and the periodic ``every()`` helper.

This is TorchSharp's first technique: let the garbage collector find what is
unreachable and call it regularly. In PyTorch a tensor is freed the moment its last
reference goes (reference counting, through c10's allocator); the garbage collector
only matters for tensors trapped in reference cycles (a module or closure that points
back at itself, an exception traceback kept in a variable). ``cleanup()`` runs
``gc.collect()``, then returns the accelerator's cached blocks to the driver
(``empty_cache``; ``ipc_collect`` on CUDA), and says what that freed.

Cost (``python benchmarks/scope.py``): dominated by ``gc.collect()``, which walks every
container object the interpreter tracks; see docs/cleanup.md for measured numbers.
``empty_cache`` also makes the next allocations slower (they go to the driver again).
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from torchmem.collect.cpu import heap_bytes
from torchmem.errors import UsageError
from torchmem.model.scope import CleanupReport

__all__ = ["cleanup", "every", "Every", "Periodic"]

T = TypeVar("T")


def _accelerator() -> tuple[str, Any] | None:
    """The accelerator module in use, without initialising one that is not."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return f"cuda:{torch.cuda.current_device()}", torch.cuda
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available() and getattr(xpu, "is_initialized", lambda: True)():
        return f"xpu:{xpu.current_device()}", xpu
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available() and hasattr(torch, "mps"):
        return "mps", torch.mps
    return None


def _first_figure(mod: Any, names: tuple[str, ...]) -> int | None:
    """The first of ``names`` that ``mod`` offers, called; None if none works."""
    for name in names:
        fn = getattr(mod, name, None)
        if fn is not None:
            try:
                return int(fn())
            except (RuntimeError, TypeError):
                return None
    return None


def _allocated(mod: Any) -> int | None:
    return _first_figure(mod, ("memory_allocated", "current_allocated_memory"))


def _reserved(mod: Any) -> int | None:
    return _first_figure(mod, ("memory_reserved", "driver_allocated_memory"))


def cleanup(*, empty_cache: bool = True, generation: int = 2) -> CleanupReport:
    """Collect garbage, then release the accelerator cache; report what was freed.

    Args:
        empty_cache: also return cached accelerator blocks to the driver
            (``torch.cuda.empty_cache()`` and ``ipc_collect()``; MPS/XPU equivalents).
            Leave it off in hot loops: the next allocations become driver calls.
        generation: the oldest garbage-collector generation to collect (0-2).

    Returns:
        A :class:`~torchmem.model.scope.CleanupReport`: objects collected, CPU heap
        bytes freed, accelerator bytes freed and cache returned, and the time taken.

    Example:
        >>> r = torchmem.cleanup()                 # doctest: +SKIP
        >>> print(r.collected, r.heap_freed)       # doctest: +SKIP

    Known limitations:
        ``heap_freed`` is process-wide: allocations other threads make meanwhile are
        subtracted. ``cleanup()`` cannot free anything still reachable: use
        ``torchmem.release`` or a scope for that.
    """
    start = time.perf_counter()
    acc = _accelerator()
    name, mod = acc if acc is not None else (None, None)
    alloc0 = _allocated(mod) if mod is not None else None
    res0 = _reserved(mod) if mod is not None else None
    heap0 = heap_bytes()
    g0 = time.perf_counter()
    collected = gc.collect(generation)
    gc_seconds = time.perf_counter() - g0
    heap1 = heap_bytes()
    device_freed = cache_released = None
    if mod is not None:
        alloc1 = _allocated(mod)
        if alloc0 is not None and alloc1 is not None:
            device_freed = alloc0 - alloc1
        if empty_cache:
            mod.empty_cache()
            ipc = getattr(mod, "ipc_collect", None)
            if ipc is not None:
                ipc()
        res1 = _reserved(mod)
        if res0 is not None and res1 is not None:
            cache_released = res0 - res1
    return CleanupReport(
        collected=collected,
        seconds=time.perf_counter() - start,
        gc_seconds=gc_seconds,
        heap_freed=None if heap0 is None or heap1 is None else heap0 - heap1,
        device=name,
        device_freed=device_freed,
        cache_released=cache_released,
    )


class _Counter:
    def __init__(self, n: int, on_cleanup: Callable[[CleanupReport], Any] | None,
                 empty_cache: bool) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise UsageError(
                f"torchmem.every: n must be a positive integer; expected >= 1, got {n!r}",
                tip="every(loader, n=100) cleans up after every 100th item",
            )
        self.n = n
        self.steps = 0
        self.cleanups = 0
        self.seconds = 0.0
        self.collected = 0
        self.last: CleanupReport | None = None
        self._on_cleanup = on_cleanup
        self._empty_cache = empty_cache

    def _tick(self) -> CleanupReport | None:
        self.steps += 1
        if self.steps % self.n:
            return None
        report = cleanup(empty_cache=self._empty_cache)
        self.cleanups += 1
        self.seconds += report.seconds
        self.collected += report.collected
        self.last = report
        if self._on_cleanup is not None:
            self._on_cleanup(report)
        return report


class Every(_Counter, Generic[T]):
    """Iterate over an iterable, running :func:`cleanup` after every ``n`` items.

    Attributes:
        steps: items handed out so far.
        cleanups: cleanups run; ``seconds``/``collected``: their totals;
        last: the last :class:`CleanupReport`, or ``None``.
    """

    def __init__(self, iterable: Iterable[T], n: int,
                 on_cleanup: Callable[[CleanupReport], Any] | None = None,
                 empty_cache: bool = True) -> None:
        super().__init__(n, on_cleanup, empty_cache)
        self._iterable = iterable

    def __iter__(self) -> Iterator[T]:
        for item in self._iterable:
            yield item
            self._tick()  # the body of the loop for this item has run

    def __len__(self) -> int:
        return len(self._iterable)  # type: ignore[arg-type]


class Periodic(_Counter):
    """Callback form: call it once per step; it runs :func:`cleanup` every ``n`` calls
    and returns the report then (``None`` otherwise)."""

    def __call__(self, *args: Any, **kwargs: Any) -> CleanupReport | None:
        return self._tick()


def every(iterable: Iterable[T] | None = None, n: int = 100, *,
          on_cleanup: Callable[[CleanupReport], Any] | None = None,
          empty_cache: bool = True) -> Any:
    """Run :func:`cleanup` every ``n`` steps of a loop.

    Args:
        iterable: the loop's iterable (a DataLoader...). Leave it out for the callback
            form.
        n: steps between cleanups.
        on_cleanup: called with each :class:`CleanupReport` (logging).
        empty_cache: passed to :func:`cleanup`.

    Returns:
        An :class:`Every` iterable wrapping ``iterable``, or, without one, a
        :class:`Periodic` callable to call once per step (e.g. from a training
        framework's step-end callback).

    Raises:
        UsageError: ``n`` is not a positive integer.

    Example:
        >>> for batch in torchmem.every(loader, n=200):    # doctest: +SKIP
        ...     train_step(batch)
        >>> tick = torchmem.every(n=200); tick()           # doctest: +SKIP
    """
    if iterable is None:
        return Periodic(n, on_cleanup, empty_cache)
    return Every(iterable, n, on_cleanup, empty_cache)
