"""``torchmem.Monitor``: a background sampler of one device, cheap enough to leave on.

A daemon thread takes a :func:`torchmem.read` reading every ``interval`` seconds into a
bounded ring buffer, and keeps the peak sample of the whole run even once it has been
evicted. ``start()`` and ``stop()`` return at once (``stop`` joins the thread, which
wakes immediately). ``step(i)`` tags the following samples with the training step and
takes a boundary sample, so growth per step can be read from the timeline.

Cost: one reading per sample (CPU: ~10-20 us, RSS from ``/proc`` plus glibc
``mallinfo2``; CUDA: one allocator-stats call plus ``mem_get_info``), on a thread that
holds the GIL only while it reads. At the default 50 ms interval that is well under
0.1% of one core; ``benchmarks/collectors.py`` measures the effect on training loops.
Memory held: ``capacity`` samples of ~1 KiB each (10 000 by default: ~10 MiB at most).

Known limitations:
    * Sampling sees the state at sample times: a spike shorter than ``interval`` is
      missed unless a step boundary falls on it. CUDA readings also report the
      allocator's ``peak_allocated``, which sees every spike; use
      :class:`torchmem.Tracker` for exact CPU peaks.
    * While the main thread holds the GIL in pure-Python code, a sample waits for it
      (up to ``sys.getswitchinterval()``, 5 ms): sample times jitter by that much.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from types import TracebackType

from torchmem.collect.readings import DeviceLike, read_resolved, resolve_device
from torchmem.errors import UsageError
from torchmem.model.timeline import Sample, Timeline

__all__ = ["Monitor"]


class Monitor:
    """Sample a device's memory in the background.

    Args:
        interval: seconds between samples (> 0; default 0.05), or ``None`` for no
            sampler thread at all: samples are then taken only by ``start``, ``step``
            and ``stop`` (zero background cost; one reading per step).
        device: device to sample (see :func:`torchmem.read`); ``None`` is the current
            accelerator if one is initialised, else the CPU.
        capacity: the most samples kept (ring buffer; >= 1).

    Attributes:
        device: the normalised device string.
        error: the exception that stopped the sampler thread early, if any.

    Raises:
        UsageError: ``interval`` or ``capacity`` out of range.
        DeviceError: unknown or unavailable device.

    Example:
        >>> with torchmem.Monitor(interval=0.05) as m:
        ...     for i, batch in enumerate(loader):
        ...         m.step(i)
        ...         train_step(batch)
        >>> m.timeline.peak_used, m.timeline.per_step()
    """

    def __init__(
        self, interval: float | None = 0.05, device: DeviceLike = None, capacity: int = 10_000
    ) -> None:
        if interval is not None and (
            isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0
        ):
            raise UsageError(
                f"torchmem.Monitor: interval must be a positive number of seconds; "
                f"expected e.g. 0.05, got {interval!r}",
                tip="intervals of 0.01-1 s are typical; see docs/measure.md",
            )
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise UsageError(
                f"torchmem.Monitor: capacity must be a positive int; expected e.g. "
                f"10000, got {capacity!r}",
                tip="capacity bounds the samples kept in memory",
            )
        self.device = resolve_device(device)
        self.interval = None if interval is None else float(interval)
        self.capacity = capacity
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._samples: deque[Sample] = deque(maxlen=capacity)
        self._dropped = 0
        self._peak: Sample | None = None
        self._step: int | None = None
        self._started = 0.0
        self._stopped: float | None = None
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler_cpu = 0.0

    # -- life cycle ------------------------------------------------------------------
    def start(self) -> Monitor:
        """Take a first sample and start the sampler thread; returns at once.

        Raises:
            UsageError: the monitor was already started.
        """
        if self._thread is not None:
            raise UsageError(
                "torchmem.Monitor: start() called twice; expected a monitor that was not "
                "started, got one that is " + ("running" if self.running else "stopped"),
                tip="create a new Monitor for each run",
            )
        self._started = time.time()
        self._sample(boundary=False)
        self._thread = threading.Thread(target=self._run, name="torchmem-monitor", daemon=True)
        if self.interval is not None:
            self._thread.start()
        return self

    def stop(self) -> Timeline:
        """Stop sampling (takes a last sample) and return the timeline.

        Calling it again returns the same timeline.
        """
        thread = self._thread
        if thread is None:
            raise UsageError(
                "torchmem.Monitor: stop() before start(); expected a started monitor, "
                "got one never started",
                tip="call m.start() first, or use 'with torchmem.Monitor() as m:'",
            )
        if self._stopped is None:
            self._wake.set()
            if thread.is_alive():
                thread.join()
            self._sample(boundary=False)
            self._stopped = time.time()
        return self.timeline

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread is not None:
            self.stop()

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._thread is not None and self._stopped is None

    def _run(self) -> None:
        interval = self.interval or 0.05
        clock = time.thread_time
        while not self._wake.wait(interval):
            try:
                self._sample(boundary=False)
            except BaseException as exc:  # noqa: BLE001 - keep it, never kill the user's run
                self.error = exc
                return
            finally:
                self._sampler_cpu = clock()

    def _sample(self, boundary: bool) -> Sample:
        reading = read_resolved(self.device)
        with self._lock:
            sample = Sample(time=reading.time, step=self._step, reading=reading, boundary=boundary)
            if len(self._samples) == self.capacity:
                self._dropped += 1
            self._samples.append(sample)
            used = sample.used
            if used is not None and (
                self._peak is None or self._peak.used is None or used > self._peak.used
            ):
                self._peak = sample
        return sample

    # -- steps and results -------------------------------------------------------------
    def step(self, i: int | None = None, *, sample: bool = True) -> int:
        """Mark the start of training step ``i`` (default: the previous step + 1).

        Args:
            i: the step index; ``None`` counts on from the last one (first is 0).
            sample: take a boundary sample now (one reading, ~10-30 us), so that each
                step has an exact figure at its start whatever the interval.

        Returns:
            The step index now in progress.
        """
        with self._lock:
            if i is None:
                i = 0 if self._step is None else self._step + 1
            self._step = int(i)
        if sample and self.running:  # also without a sampler thread (interval=None)
            self._sample(boundary=True)
        return int(i)

    @property
    def sampler_cpu(self) -> float:
        """CPU seconds the sampler thread has used so far (its whole cost to the process)."""
        return self._sampler_cpu

    @property
    def peak(self) -> Sample | None:
        """The highest-``used`` sample so far (evicted samples included)."""
        return self._peak

    @property
    def timeline(self) -> Timeline:
        """A snapshot of the samples so far (safe to call while running)."""
        with self._lock:
            return Timeline(
                device=self.device,
                interval=self.interval,
                capacity=self.capacity,
                samples=tuple(self._samples),
                dropped=self._dropped,
                peak=self._peak,
                started=self._started,
                stopped=self._stopped,
            )

    def __repr__(self) -> str:
        state = "running" if self.running else ("stopped" if self._stopped else "new")
        return (
            f"Monitor(device={self.device!r}, interval={self.interval}, {state}, "
            f"samples={len(self._samples)})"
        )
