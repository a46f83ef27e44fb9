"""``torchmem.track()``: baseline, delta and peak of a region, with named phases.

Two sources of truth, chosen by device:

* **allocator** (CUDA, XPU): the caching allocator's counters. ``delta`` is
  ``memory_allocated`` now minus at the start; the peak is ``max_memory_allocated``.
  Exact, cheap (no per-op cost) and it sees everything the allocator hands out, kernel
  workspaces included.
* **engine** (CPU, MPS and other devices): torchmem's private dispatch-mode engine
  (:mod:`torchmem.collect._engine`) counts the storages of tensors created inside the
  region, weakly, and subtracts them when they are freed. ``delta`` and ``peak_delta``
  are then exact tensor bytes: allocate 4 MiB, 8 MiB, free the 4 MiB, allocate 2 MiB
  and ``peak_delta`` is exactly 12 MiB. Cost: one Python call per aten op
  (``benchmarks/collectors.py`` measures it).

Nested trackers: the allocator's peak counter is global, and resetting it for an inner
tracker would erase the outer tracker's peak. A registry of active trackers per device
folds the current peak into every active tracker before any reset, so nested (and
sequential, and same-device concurrent) trackers each get their own exact peak.

With ``exact=True`` on the engine path, the engine also counts every storage that was
alive when the region began (a *ledger*, :mod:`torchmem.collect._ledger`: one census
the first time, then a scan of the objects created since the previous region), so
frees of tensors older than the region lower ``delta``, and ``baseline``, ``current``
and ``peak`` are exact live tensor bytes: ``peak`` is the live bytes at the highest
moment of the region.

Known limitations:
    * On CUDA/XPU, entering a tracker or calling ``mark`` resets the allocator's peak
      counters (``reset_peak_memory_stats``): your own ``max_memory_allocated()`` calls
      then see the peak since that moment.
    * Without ``exact=True`` (and before any exact tracker in the process), the engine
      only counts storages created inside the region (on the threads that entered a
      tracker): freeing a tensor that existed before does not lower ``delta``. See
      :mod:`torchmem.collect._engine` for what the engine cannot see.
    * On the CPU, ``baseline``/``current`` are :func:`torchmem.read` readings (``heap``
      by default); ``peak`` is ``baseline.used + peak_delta``, exact only with
      ``exact=True`` (baseline from the ledger's ``tensor_bytes``).
    * After an exact tracker the ledger stays: one weak reference per live storage of
      the device and one callback per free, until ``engine.forget()``
      (``torchmem.collect._engine``); later plain trackers then also see frees of the
      storages it knows.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import replace
from types import TracebackType
from typing import Any, Protocol

from torchmem.collect import _ledger
from torchmem.collect._engine import engine
from torchmem.collect.readings import DeviceLike, read, resolve_device
from torchmem.errors import UsageError
from torchmem.units import format_delta
from torchmem.model.readings import Mark, Reading, TrackResult

__all__ = ["Tracker", "track"]


class _Counter(Protocol):
    def current(self) -> int: ...
    def peak(self) -> int: ...
    def reset_peak(self) -> None: ...


_registry_lock = threading.RLock()
_active: dict[str, list[Tracker]] = {}


def _fold(device: str, counter: _Counter) -> None:
    """Fold the counter's peak into every active tracker of ``device``, then reset it."""
    peak = counter.peak()
    for tracker in _active.get(device, ()):
        tracker._absorb(peak)
    counter.reset_peak()


def _uses_allocator(device_type: str) -> bool:
    if device_type in ("cuda", "xpu"):
        import torch

        return hasattr(getattr(torch, device_type, None), "max_memory_allocated")
    return False


class Tracker:
    """Measure memory across a region: baseline, current, delta, peak and named marks.

    Use :func:`torchmem.track` (same arguments) or the class directly.

    Args:
        device: the device to track (see :func:`torchmem.read`); ``None`` is the current
            accelerator if one is initialised, else the CPU.
        exact: count the storages alive at the start too (engine path: a census the
            first time, then a scan of the objects made since the previous region,
            ~0.5 ms), so that ``delta`` includes frees of older tensors and
            ``baseline``/``current``/``peak`` are exact live tensor bytes. On
            CUDA/XPU it adds a census to the baseline and end readings.

    Attributes:
        device: the normalised device string.
        source: ``"allocator"`` or ``"engine"`` (see the module docstring).
        marks: the :class:`~torchmem.model.readings.Mark` of each ``mark()`` call.

    Raises:
        DeviceError: unknown or unavailable device.
        UsageError: the tracker is entered twice, or used before it is entered.

    Example:
        >>> with torchmem.track("cpu") as t:
        ...     y = model(x); t.mark("forward")
        ...     y.sum().backward(); t.mark("backward")
        >>> t.peak_delta >= t.marks[0].delta
        True
    """

    def __init__(self, device: DeviceLike = None, *, exact: bool = False) -> None:
        self.device = resolve_device(device)
        self.exact = exact
        kind = self.device.split(":", 1)[0]
        self.source = "allocator" if _uses_allocator(kind) else "engine"
        self.marks: list[Mark] = []
        self._kind = kind
        self._counter: _Counter | None = None
        self._state = "new"
        self._thread: int | None = None
        self._baseline: Reading | None = None
        self._end: Reading | None = None
        self._base = 0
        self._peak = 0
        self._phase_peak = 0
        self._end_current = 0
        self._ledger_failed = False

    # -- context manager -----------------------------------------------------------
    def __enter__(self) -> Tracker:
        if self._state != "new":
            raise UsageError(
                f"torchmem.track: a Tracker measures one region; expected a new tracker, "
                f"got one that is {self._state}",
                tip="create a new torchmem.track() for each region",
            )
        ledger = self.exact and self.source == "engine"
        if self.source == "allocator":
            self._baseline = read(self.device, exact=self.exact)
            from torchmem.collect.cuda import peak_counter

            counter: _Counter = peak_counter(self._kind, int(self.device.split(":")[1]))
        else:
            counter = engine.acquire(self._kind)
        self._thread = threading.get_ident()
        try:
            with _registry_lock:
                _fold(self.device, counter)
                if ledger:
                    self._sync(counter)
                self._counter = counter
                self._base = self._peak = self._phase_peak = counter.current()
                _active.setdefault(self.device, []).append(self)
        except BaseException:
            if self.source == "engine":
                engine.release(self._kind)
            raise
        if self.source == "engine":
            reading = read(self.device)
            # exact: the ledger's total is the exact live tensor bytes, no census needed
            if ledger and not self._ledger_failed:
                reading = replace(reading, tensor_bytes=self._base)
            self._baseline = reading
        self._state = "active"
        return self

    def _sync(self, counter: _Counter) -> None:
        """Complete the engine's ledger of live storages (see ``collect/_ledger.py``);
        active trackers of this device move their baselines by what it adds."""
        before = counter.current()
        try:
            _ledger.sync(engine, self._kind)
        except Exception as exc:  # noqa: BLE001 - never break the user's program
            engine.forget(self._kind)
            self._ledger_failed = True
            warnings.warn(
                f"torchmem.track: could not list the live tensors ({exc!r}); this region's "
                "delta and peak count only storages created inside it, and peak is not "
                "an exact absolute figure",
                RuntimeWarning,
                stacklevel=4,
            )
            return
        added = counter.current() - before
        if added:
            for tracker in _active.get(self.device, ()):
                tracker._base += added
                tracker._peak += added
                tracker._phase_peak += added
        counter.reset_peak()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state != "active":
            return
        counter = self._require()
        try:
            with _registry_lock:
                _fold(self.device, counter)
                self._end_current = counter.current()
                trackers = _active.get(self.device, [])
                if self in trackers:
                    trackers.remove(self)
                if not trackers:
                    _active.pop(self.device, None)
        finally:
            self._state = "finished"
            if self.source == "engine":
                engine.release(self._kind)
                _ledger.ended(engine, self._kind)
                end = read(self.device)
                if self.exact and not self._ledger_failed:
                    end = replace(end, tensor_bytes=self._end_current)
                self._end = end
            else:
                self._end = read(self.device, exact=self.exact)

    def _absorb(self, peak: int) -> None:
        if peak > self._peak:
            self._peak = peak
        if peak > self._phase_peak:
            self._phase_peak = peak

    def _require(self) -> _Counter:
        if self._counter is None:
            raise UsageError(
                "torchmem.track: the tracker has not started; expected it inside "
                "'with torchmem.track(...) as t:', got a tracker never entered",
                tip="use the tracker as a context manager",
            )
        return self._counter

    # -- phases ----------------------------------------------------------------------
    def mark(self, name: str) -> Mark:
        """Record a named phase boundary (e.g. after forward, backward, step).

        Args:
            name: label of the phase that just ended.

        Returns:
            The :class:`~torchmem.model.readings.Mark`: reading now, net delta since the
            region began, and the highest bytes above the baseline during this phase.

        Raises:
            UsageError: the tracker is not active.
        """
        counter = self._require()
        if self._state != "active":
            raise UsageError(
                f"torchmem.track: mark({name!r}) outside the region; expected an active "
                f"tracker, got one that is {self._state}",
                tip="call t.mark() inside the 'with' block",
            )
        with _registry_lock:
            _fold(self.device, counter)
            now = counter.current()
            phase_peak = self._phase_peak
            self._phase_peak = now
        result = Mark(
            name=str(name),
            reading=read(self.device),
            delta=now - self._base,
            peak_delta=max(phase_peak - self._base, 0),
        )
        self.marks.append(result)
        return result

    # -- figures ---------------------------------------------------------------------
    def _current_counter(self) -> int:
        if self._state == "active":
            return self._require().current()
        self._require()
        return self._end_current

    def _current_peak(self) -> int:
        if self._state == "active":
            return max(self._peak, self._require().peak())
        self._require()
        return self._peak

    @property
    def baseline(self) -> Reading:
        """The reading taken when the region began."""
        self._require()
        assert self._baseline is not None
        return self._baseline

    @property
    def current(self) -> Reading:
        """A reading now while active; the end reading once the region is over."""
        self._require()
        if self._state == "active" or self._end is None:
            return read(self.device)
        return self._end

    @property
    def delta(self) -> int:
        """Net bytes the region added that are still alive (now, or at its end)."""
        return self._current_counter() - self._base

    @property
    def peak_delta(self) -> int:
        """Highest bytes above the baseline reached inside the region (so far)."""
        return max(self._current_peak() - self._base, 0)

    @property
    def peak(self) -> int:
        """Absolute peak: the allocator's peak, or ``baseline.used + peak_delta``."""
        if self.source == "allocator":
            return self._current_peak()
        used = self.baseline.used or 0
        return used + self.peak_delta

    def result(self) -> TrackResult:
        """The finished region as a JSON-ready record.

        Raises:
            UsageError: the region has not finished.
        """
        if self._state != "finished" or self._end is None or self._baseline is None:
            raise UsageError(
                f"torchmem.track: result() needs a finished region; expected the 'with' "
                f"block to have ended, got a tracker that is {self._state}",
                tip="call t.result() after the 'with' block",
            )
        return TrackResult(
            device=self.device,
            source=self.source,
            baseline=self._baseline,
            end=self._end,
            delta=self.delta,
            peak_delta=self.peak_delta,
            peak=self.peak,
            marks=tuple(self.marks),
        )

    def __repr__(self) -> str:
        if self._state == "new":
            return f"Tracker(device={self.device!r}, new)"
        marks = f", {len(self.marks)} marks" if self.marks else ""
        return (
            f"Tracker({self.device}, {self._state}: delta {format_delta(self.delta)}, "
            f"peak {format_delta(self.peak_delta)}{marks})"
        )


def track(device: DeviceLike = None, *, exact: bool = False) -> Tracker:
    """Measure a region: ``with torchmem.track("cpu") as t: ...`` (see :class:`Tracker`).

    Args:
        device: device to track; ``None`` is the current accelerator if initialised,
            else the CPU.
        exact: exact live tensor bytes at the start, the end and the peak (see
            :class:`Tracker`).

    Returns:
        A :class:`Tracker`, to use as a context manager.
    """
    return Tracker(device, exact=exact)


def _active_trackers(device: str) -> list[Any]:
    """Trackers active on ``device`` (for tests and diagnostics)."""
    with _registry_lock:
        return list(_active.get(device, ()))
