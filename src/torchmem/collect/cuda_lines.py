"""Private: per-line CUDA memory of a profiled step, from the allocator's own history.

For each profiled step, :class:`CudaLineRecorder` turns on the caching allocator's
history with Python stacks (``torch.cuda.memory._record_memory_history(context="alloc",
stacks="python")``), and at the step's end takes ``torch.cuda.memory._snapshot()`` and
turns it off again. The trace of each initialised device becomes a per-line window
(:func:`torchmem.analyze.cuda_history.window_from_trace`): the allocator's block sizes,
exactly what ``memory_allocated`` counts.

Cost, inside a profiled step: the allocator's recording (a C++ Python-stack capture per
allocation, about a microsecond) and one snapshot at the end (proportional to the
segments and trace entries). Outside: nothing.

Known limitations:
    * If the program records its own memory history, the recorder stays off (it would
      reset the program's recording) and says so.
    * A step that allocates more than ``max_entries`` times wraps the trace's ring
      buffer: its per-line sums are then incomplete (reported as ``wrapped``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from torchmem.analyze.cuda_history import (
    StackFrameTuple,
    TraceWindow,
    stacks_by_address,
    window_from_trace,
)

__all__ = ["CudaLineRecorder", "cuda_recordable"]


def cuda_recordable() -> bool:
    """CUDA is initialised and this torch has the allocator history."""
    try:
        return (torch.cuda.is_available() and torch.cuda.is_initialized()
                and hasattr(torch.cuda.memory, "_record_memory_history")
                and hasattr(torch.cuda.memory, "_snapshot"))
    except Exception:  # noqa: BLE001 - a broken CUDA install: no CUDA lines
        return False


def _parameters() -> Any:
    import inspect

    try:
        return inspect.signature(torch.cuda.memory._record_memory_history).parameters
    except (TypeError, ValueError):
        return {}


def _history_enabled() -> bool:
    probe = getattr(torch._C, "_cuda_isHistoryEnabled", None)
    try:
        return bool(probe()) if probe is not None else False
    except Exception:  # noqa: BLE001
        return False


class CudaLineRecorder:
    """Records the CUDA allocator's history during profiled steps.

    Args:
        is_user: decides whether a file name is the user's code.
        all_files: attribute to library lines too.
        max_entries: the trace's ring buffer size.

    Attributes:
        notes: sentences for the report (recording refused, trace wrapped).
    """

    def __init__(self, is_user: Callable[[str], bool], all_files: bool = False,
                 max_entries: int = 1_000_000) -> None:
        self.is_user = is_user
        self.all_files = all_files
        self.max_entries = max_entries
        self.notes: list[str] = []
        self._start: dict[int, int] | None = None
        self._step = 0
        self._known: dict[int, dict[int, Any]] = {}  # device -> blocks left alive
        self._refused = False

    @property
    def active(self) -> bool:
        return self._start is not None

    def begin(self, step: int, paired: bool = True) -> bool:
        """Start recording for ``step`` (``paired``: the previous window ended where this
        one begins); False if CUDA is not in use or recording is refused."""
        if not paired:
            self._known = {}
        if self._start is not None or self._refused or not cuda_recordable():
            return False
        if _history_enabled():
            self._refused = True
            self.notes.append("CUDA lines were not recorded: the program records its own "
                              "allocator history (torch.cuda.memory._record_memory_history)")
            return False
        start = {i: int(torch.cuda.memory_allocated(i)) for i in range(torch.cuda.device_count())}
        options: dict[str, Any] = {"enabled": "all", "context": "alloc", "stacks": "python",
                                   "max_entries": self.max_entries}
        if "clear_history" in _parameters():
            options["clear_history"] = True  # a trace of this step only
        torch.cuda.memory._record_memory_history(**options)
        self._start, self._step = start, step
        return True

    def end(self) -> list[TraceWindow]:
        """Stop recording; one window per device that allocated during the step."""
        start, self._start = self._start, None
        if start is None:
            return []
        try:
            snapshot: dict[str, Any] = torch.cuda.memory._snapshot()
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
        out = []
        traces = snapshot.get("device_traces") or []
        for index, trace in enumerate(traces):
            if index not in start or not trace:
                continue
            delta = int(torch.cuda.memory_allocated(index)) - start[index]
            window = window_from_trace(trace, step=self._step, device=f"cuda:{index}",
                                       start_allocated=start[index], is_user=self.is_user,
                                       all_files=self.all_files, measured_delta=delta,
                                       known=self._known.get(index))
            window.tally.paired = index in self._known
            self._known[index] = {b[0]: b for b in window.alive}
            if window.wrapped:
                self.notes.append(
                    f"step {self._step} on cuda:{index}: the allocator's trace does not "
                    "cover the whole step (more allocations than its ring buffer holds); "
                    "its per-line figures are incomplete")
            out.append(window)
        return out

    def block_stacks(self) -> dict[int, tuple[StackFrameTuple, ...]]:
        """``address -> allocating stack`` of the CUDA blocks in use now that were made
        in a profiled step (the allocator keeps each block's stack after its history
        is turned off); empty when CUDA is not in use or recording was refused (then
        the stacks would be the program's own recording)."""
        if self._refused or not cuda_recordable() or (
                self._start is None and _history_enabled()):
            return {}  # not ours to read: the program records its own history
        try:
            snapshot: dict[str, Any] = torch.cuda.memory._snapshot()
        except Exception:  # noqa: BLE001 - no stacks rather than a broken run
            return {}
        return stacks_by_address(snapshot.get("segments") or (), self.is_user, self.all_files)

