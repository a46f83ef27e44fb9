"""Memory per source line and the allocation sites of the largest storages, as plain data.

``torchmem lines`` (and :func:`torchmem.profile_lines`) measure, for each line of code that
allocated tensor memory in the profiled steps:

* ``allocated_bytes``: bytes of the storages created there, per profiled step;
* ``alive_bytes``: of those, the bytes still alive at the end of the step;
* ``delta_bytes``: the line's share of the step's net change: what it allocated minus
  what was freed during the step of storages it had allocated (in any earlier step).
  The ``delta_bytes`` of all lines plus :attr:`LineProfile.unattributed_bytes` add up to
  the measured delta of the step (exactly for each step; the records hold means);
* ``peak_share``: the share of the highest profiled peak held by storages made there.

A line that *keeps* memory alive without allocating it (``losses.append(loss)``) carries
``retained_bytes``: the growth per step the doctor attributes to that statement.

:class:`AllocationSite` joins one of the largest storages (at the peak, at a census, at
an out-of-memory error) with the stack that allocated it (user frames first) and the
holder that keeps it (``epoch_logits[3]``, ``grad of fc.weight``...).

This module never imports torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from torchmem.model._serde import Record
from torchmem.model.schema import NON_NEGATIVE, bounds

__all__ = ["LineRecord", "StackFrame", "AllocationSite", "LineWindow", "LineProfile",
           "LINE_WHEN"]

_MANY = bounds(max_items=100_000)
_SHARE = bounds(min=0.0, max=1.0)

#: Moments an :class:`AllocationSite` can describe.
LINE_WHEN: tuple[str, ...] = ("peak", "census", "oom")


@dataclass(frozen=True)
class LineRecord(Record):
    """Memory attributed to one source line (per profiled step unless said otherwise).

    Attributes:
        file: the source file.
        line: 1-based line number.
        code: the source text of the line, stripped.
        function: the function the line belongs to (``<module>`` at top level).
        device: ``cpu`` or ``cuda:N``.
        allocated_bytes: bytes of storages created on this line per profiled step (mean).
        alive_bytes: of those, bytes still alive at the end of their step (mean).
        delta_bytes: net bytes per step: created here and alive at the step's end, minus
            bytes freed during the step of storages created here before it (mean over
            the profiled steps whose previous step was profiled too).
        allocations: storages created on this line per profiled step (mean, rounded).
        peak_bytes: bytes of storages created here alive at the highest profiled peak.
        peak_share: ``peak_bytes`` over that peak's live tensor bytes (0..1).
        retained_bytes: growth per step kept alive by the statement on this line (the
            doctor's culprit line), 0 if none.
        retains: what this line keeps alive, e.g. ``epoch_logits (retained_graph)``.
    """

    file: str
    line: int = field(metadata=NON_NEGATIVE)
    code: str = ""
    function: str = ""
    device: str = "cpu"
    allocated_bytes: int = field(default=0, metadata=NON_NEGATIVE)
    alive_bytes: int = field(default=0, metadata=NON_NEGATIVE)
    delta_bytes: int = 0
    allocations: int = field(default=0, metadata=NON_NEGATIVE)
    peak_bytes: int = field(default=0, metadata=NON_NEGATIVE)
    peak_share: float = field(default=0.0, metadata=_SHARE)
    retained_bytes: int = field(default=0, metadata=NON_NEGATIVE)
    retains: str | None = None

    @property
    def where(self) -> str:
        """``file.py:line`` (file name only)."""
        return f"{os.path.basename(self.file) or self.file}:{self.line}"


@dataclass(frozen=True)
class StackFrame(Record):
    """One frame of an allocating stack.

    Attributes:
        file, line, function: where.
        user: the frame is the user's code (not torch, the standard library or an
            installed package).
    """

    file: str
    line: int = field(metadata=NON_NEGATIVE)
    function: str = ""
    user: bool = True


@dataclass(frozen=True)
class AllocationSite(Record):
    """One of the largest storages, where it was made and who keeps it.

    Attributes:
        when: ``peak`` (alive at the highest profiled peak), ``census`` (listed by the
            census at the step with the highest memory) or ``oom`` (alive at an
            out-of-memory error).
        step: the step of that moment (for the peak: of its window, see
            :attr:`LineProfile.peak_kind`).
        nbytes: bytes of the storage.
        device: ``cpu``, ``cuda:0``...
        dtype, shape: of the tensor that created it, when known.
        role: the census role (``parameter``, ``gradient``, ``activation``...) if known.
        holder: who keeps it: a path from the script's variables (``epoch_logits[3]``)
            or the census name (``grad of fc.weight``, ``saved by AddmmBackward0``).
        made_in: the window it was allocated in (``step 3``, ``setup``, ``end``), or
            ``None`` when it was made in a step that was not profiled.
        stack: the allocating stack, user frames first (innermost first within each).
    """

    when: str
    step: int = field(metadata=NON_NEGATIVE)
    nbytes: int = field(metadata=NON_NEGATIVE)
    device: str = "cpu"
    dtype: str | None = None
    shape: tuple[int, ...] | None = field(default=None, metadata=bounds(min=0, max_items=64))
    role: str | None = None
    holder: str | None = None
    made_in: str | None = None
    stack: tuple[StackFrame, ...] = field(default=(), metadata=bounds(max_items=256))


@dataclass(frozen=True)
class LineWindow(Record):
    """One profiled step, with its measured figures.

    Attributes:
        step: the step; for the other kinds, the step the window began after.
        kind: ``step`` (one whole training step), ``setup`` (the script's start to its
            first step, or until the step source settled) or ``end`` (after the last
            step; or a window cut short by a change of step source).
        delta_bytes: measured net change of live tensor bytes over the step.
        peak_bytes: highest live tensor bytes during the step.
        allocated_bytes: bytes of storages created during the step.
        unattributed_bytes: the part of ``delta_bytes`` no line explains: frees of
            storages made before profiling or in steps that were not profiled.
        seconds: wall time of the step, profiling included.
        device: the device these figures are for.
        paired: the step before was profiled too (its storages freed in this step
            have a line); only paired steps enter ``delta_bytes`` of the lines.
    """

    step: int = field(metadata=NON_NEGATIVE)
    kind: str = "step"
    delta_bytes: int = 0
    peak_bytes: int = field(default=0, metadata=NON_NEGATIVE)
    allocated_bytes: int = field(default=0, metadata=NON_NEGATIVE)
    unattributed_bytes: int = 0
    seconds: float = field(default=0.0, metadata=NON_NEGATIVE)
    device: str = "cpu"
    paired: bool = True


@dataclass(frozen=True)
class LineProfile(Record):
    """How the per-line figures were measured.

    Attributes:
        steps: steps of the run (of its step source).
        profiled: the profiled windows, setup (step 0) first.
        peak_step: the step of the window with the highest peak (the one
            ``peak_share`` refers to); ``peak_kind`` that window's kind.
        peak_bytes: its peak live tensor bytes.
        unattributed_bytes: mean of the paired steps' unattributed bytes (with the
            lines' ``delta_bytes``, it adds up to their mean measured delta).
        all_files: library lines were attributed too (not only the user's own files).
        budget: the overhead budget of the sampler, a fraction of the plain run time
            (0.4 by default), or None when steps were not chosen by a budget.
        sites: allocation sites of the largest storages (at the peak, census, OOM).
        notes: sentences for the report (what could not be measured, and why).
    """

    steps: int = field(default=0, metadata=NON_NEGATIVE)
    profiled: tuple[LineWindow, ...] = field(default=(), metadata=_MANY)
    peak_step: int | None = field(default=None, metadata=NON_NEGATIVE)
    peak_kind: str = "step"
    peak_bytes: int = field(default=0, metadata=NON_NEGATIVE)
    unattributed_bytes: int = 0
    all_files: bool = False
    budget: float | None = field(default=None, metadata=bounds(min=0.0))
    sites: tuple[AllocationSite, ...] = field(default=(), metadata=_MANY)
    notes: tuple[str, ...] = field(default=(), metadata=_MANY)

    @property
    def steady(self) -> tuple[LineWindow, ...]:
        """The profiled whole training steps (setup and end windows left out)."""
        return tuple(w for w in self.profiled if w.kind == "step")
