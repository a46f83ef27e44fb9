"""Keep the per-step records of a long run in bounded memory.

One :class:`~torchmem.model.capture.StepRecord` costs about 0.5 KiB (two small dicts),
so a run of 20,000 steps held ~10 MiB in the runner and wrote all of it to the capture.
:class:`StepLog` keeps every record up to :data:`CAPACITY`; beyond that it keeps the first
:data:`HEAD` and the last :data:`TAIL` records in full and, in between, the records whose
step number is a multiple of a stride that doubles whenever the middle is full (so the
middle stays evenly spread over the run). Runs of at most ``CAPACITY`` steps are
unchanged. Peaks are kept exactly (:attr:`StepLog.peak`) whatever is dropped.

Cost: O(1) per step, plus one pass over the middle (about ``CAPACITY/2`` records) each
time the stride doubles.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StepLog", "CAPACITY", "HEAD", "TAIL"]

CAPACITY = 4096
HEAD = 1024
TAIL = 1024


class StepLog:
    """Bounded storage of step records in a plain list (``records``) probes can read.

    Attributes:
        records: the kept records, in step order (the list object never changes).
        count: the number of steps seen since the last :meth:`clear`.
        stride: 1 until records were dropped; then the spacing of the kept middle.
        peak: per device, the largest ``used`` of every step seen (dropped ones too).
    """

    def __init__(self, capacity: int = CAPACITY, head: int = HEAD, tail: int = TAIL) -> None:
        if head + tail >= capacity:
            raise ValueError("head + tail must leave room for a middle")
        self.capacity, self.head, self.tail = capacity, head, tail
        self.records: list[Any] = []
        self.count = 0
        self.stride = 1
        self.peak: dict[str, int] = {}

    def clear(self) -> None:
        """Forget the records (the step source changed); peaks are kept."""
        self.records.clear()
        self.count = 0
        self.stride = 1

    def add(self, record: Any) -> None:
        """Append ``record`` (its ``.step`` must be ``count + 1``), then drop to the bound."""
        self.count += 1
        for device, value in record.used.items():
            if value > self.peak.get(device, -1):
                self.peak[device] = value
        records = self.records
        records.append(record)
        if len(records) <= self.capacity and self.stride == 1:
            return
        leaving = len(records) - self.tail - 1  # just left the tail window
        if leaving >= self.head and records[leaving].step % self.stride:
            del records[leaving]
        if len(records) > self.capacity:
            self.stride *= 2
            end = len(records) - self.tail
            records[self.head:end] = [r for r in records[self.head:end]
                                      if r.step % self.stride == 0]

    @property
    def thinned(self) -> bool:
        """Whether records were dropped."""
        return len(self.records) < self.count

    def note(self) -> str | None:
        """A line for the capture's notes when records were dropped, else None."""
        if not self.thinned:
            return None
        return (f"step records: kept {len(self.records)} of {self.count} steps (the first "
                f"{self.head}, the last {self.tail}, and every {self.stride}th step between) "
                "to bound torchmem's own memory; peaks count every step")
