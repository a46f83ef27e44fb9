"""A memory timeline: readings over time, tagged with the training step (no torch).

:class:`torchmem.Monitor` produces a :class:`Timeline`; the doctor stores one in its
capture and ``analyze`` reads growth per step from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchmem.model._serde import Record
from torchmem.model.readings import Reading
from torchmem.units import format_bytes

__all__ = ["Sample", "Timeline"]


@dataclass(frozen=True)
class Sample(Record):
    """One reading in a timeline.

    Attributes:
        time: ``time.time()`` of the reading.
        step: the training step in progress (``Monitor.step``), or ``None`` before any.
        reading: the reading itself.
        boundary: True for the sample ``Monitor.step`` takes at a step boundary (as
            opposed to one of the periodic samples).
    """

    time: float
    step: int | None
    reading: Reading
    boundary: bool = False

    @property
    def used(self) -> int | None:
        """The reading's primary "bytes in use" figure."""
        return self.reading.used

    def __repr__(self) -> str:
        step = "before any step" if self.step is None else f"step {self.step}"
        mark = ", boundary" if self.boundary else ""
        used = "?" if self.used is None else format_bytes(self.used)
        return f"Sample({step}: {used} {self.reading.used_source}{mark})"


@dataclass(frozen=True)
class Timeline(Record):
    """Readings of one device over time, in a bounded ring buffer.

    Attributes:
        device: device sampled.
        interval: seconds between periodic samples (``None``: step boundaries only).
        capacity: most samples kept; older ones are dropped (counted in ``dropped``).
        samples: the samples kept, oldest first.
        dropped: samples evicted from the ring buffer.
        peak: the sample with the highest ``used`` over the *whole* run, evicted ones
            included (``None`` when nothing was sampled).
        started: ``time.time()`` when sampling started.
        stopped: when it stopped (``None`` while running).
    """

    device: str
    interval: float | None
    capacity: int
    samples: tuple[Sample, ...] = ()
    dropped: int = 0
    peak: Sample | None = None
    started: float = 0.0
    stopped: float | None = None

    def __len__(self) -> int:
        return len(self.samples)

    def __repr__(self) -> str:
        # never every sample: a full ring buffer is thousands of readings
        every = "step boundaries only" if self.interval is None else f"every {self.interval:g} s"
        parts = [f"{len(self.samples)} samples over {self.duration:.1f} s ({every})"]
        if self.dropped:
            parts.append(f"{self.dropped} dropped")
        steps = self.steps()
        if steps:
            parts.append(f"steps {steps[0]}-{steps[-1]}" if len(steps) > 1 else f"step {steps[0]}")
        if self.peak is not None:
            at = "" if self.peak.step is None else f" at step {self.peak.step}"
            used = "?" if self.peak.used is None else format_bytes(self.peak.used)
            parts.append(f"peak {used}{at}")
        if self.stopped is None:
            parts.append("running")
        return f"Timeline({self.device}: {', '.join(parts)})"

    @property
    def peak_used(self) -> int | None:
        """Highest ``used`` over the whole run, or ``None``."""
        return None if self.peak is None else self.peak.used

    @property
    def duration(self) -> float:
        """Seconds covered (to ``stopped``, or to the last sample while running)."""
        end = self.stopped
        if end is None:
            end = self.samples[-1].time if self.samples else self.started
        return max(end - self.started, 0.0)

    def used(self) -> list[int | None]:
        """The ``used`` figure of each kept sample, oldest first."""
        return [s.used for s in self.samples]

    def steps(self) -> list[int]:
        """Distinct step indices seen in the kept samples, in order of appearance."""
        seen: dict[int, None] = {}
        for s in self.samples:
            if s.step is not None:
                seen.setdefault(s.step, None)
        return list(seen)

    def per_step(self, how: str = "max") -> dict[int, int]:
        """One figure of ``used`` per step.

        Args:
            how: ``"max"`` (highest sample of the step), ``"last"`` (last sample of the
                step) or ``"boundary"`` (the sample ``Monitor.step`` took as the step
                began: the steady-state figure between steps).

        Returns:
            step -> bytes, for steps with at least one usable sample.

        Raises:
            ValueError: unknown ``how``.
        """
        if how not in ("max", "last", "boundary"):
            raise ValueError(f"how must be 'max', 'last' or 'boundary', got {how!r}")
        out: dict[int, int] = {}
        for s in self.samples:
            used = s.used
            if s.step is None or used is None:
                continue
            if how == "boundary":
                if s.boundary and s.step not in out:
                    out[s.step] = used
            elif how == "last" or s.step not in out or used > out[s.step]:
                out[s.step] = used
        return out
