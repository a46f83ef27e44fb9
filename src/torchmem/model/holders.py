"""Who holds the largest storages at a moment of a run, as plain data.

At the peak of the run (the step boundary with the highest memory reading the doctor
took a census at), at an out-of-memory error, at another exception, and at the end of the
run, the doctor lists the largest live storages of that moment's census. Each
:class:`HeldStorage` carries its bytes, dtype, shape and role, the census's owner name
(``4.weight``, ``grad of 4.weight``, ``saved by AddmmBackward0``), the Python paths a
user would write that keep it alive (``stats.hist['acts'][7]``, ``model[4].weight.grad``,
``loss.grad_fn``) with the ``file:line`` of the statement that put it there where the
source says so, and, with ``torchmem doctor --lines``, the stack that allocated it.

A storage no Python path reaches has no holders; :attr:`HeldStorage.unreached` then
says so with the evidence (what the walk covered, what the census knows of it).

This module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchmem.model._serde import Record
from torchmem.model.lines import StackFrame
from torchmem.model.schema import NON_NEGATIVE, bounds

__all__ = ["HOLDER_MOMENTS", "HolderPath", "HeldStorage", "HoldersMoment"]

#: Moments a :class:`HoldersMoment` can describe, in the order reports list them.
HOLDER_MOMENTS: tuple[str, ...] = ("oom", "exception", "peak", "eval_peak", "end")


@dataclass(frozen=True)
class HolderPath(Record):
    """One Python path that keeps a storage alive.

    Attributes:
        path: the expression as the user writes it (``self.stats.total``,
            ``logs['loss'][3]``, ``model[4].weight.grad``, ``loss.grad_fn``).
        kind: the last hop: ``local``, ``global``, ``attribute``, ``item``, ``closure``,
            ``cache``, ``grad``, ``graph``, ``traceback`` or ``internal`` (inside an object
            implemented in C: ``stream.<internal list>``).
        detail: that hop in words (``saved for backward by MmBackward0``, ``local
            `batch` of train``, ``a view of it (same storage)``).
        file, line, code: the statement that put it there, when the source says so.
        function: the function whose frame holds the path's root (``<module>``: global).
    """

    path: str
    kind: str = ""
    detail: str = ""
    file: str | None = None
    line: int | None = field(default=None, metadata=NON_NEGATIVE)
    code: str | None = None
    function: str | None = None


@dataclass(frozen=True)
class HeldStorage(Record):
    """One of the largest storages of a moment, and who holds it.

    Attributes:
        nbytes: bytes of the whole storage.
        device: ``cpu``, ``cuda:0``...
        dtype: of the largest live tensor viewing it.
        shape: of the largest live tensor viewing it.
        role: the census role: ``parameter``, ``buffer``, ``gradient``,
            ``optimizer_state``, ``activation`` (saved by a pending autograd graph) or
            ``other``.
        name: the census's owner name (``4.weight``, ``exp_avg of 4.weight``, ``saved by
            AddmmBackward0``), None when no module, optimizer or graph owns it.
        holders: the paths that keep it alive, shortest first (empty: none found).
        unreached: when no path was found, why and with what evidence.
        made_in: with ``--lines``: the window it was allocated in (``setup``, ``step
            3``), None when it was made in a step that was not profiled (or without
            ``--lines``).
        stack: with ``--lines``: the allocating stack, user frames first.
    """

    nbytes: int = field(metadata=NON_NEGATIVE)
    device: str = "cpu"
    dtype: str = ""
    shape: tuple[int, ...] = field(default=(), metadata=bounds(min=0, max_items=64))
    role: str = "other"
    name: str | None = None
    holders: tuple[HolderPath, ...] = field(default=(), metadata=bounds(max_items=64))
    unreached: str | None = None
    made_in: str | None = None
    stack: tuple[StackFrame, ...] = field(default=(), metadata=bounds(max_items=256))


@dataclass(frozen=True)
class HoldersMoment(Record):
    """The largest storages at one moment of the run, with their holders.

    Attributes:
        when: one of :data:`HOLDER_MOMENTS`: ``peak`` (the census at the step boundary
            with the highest memory reading among those censused), ``eval_peak`` (after
            the forward of an evaluation pass with the highest heap reading among those
            censused; ``note`` says which pass and forward), ``oom`` (at an
            out-of-memory error), ``exception`` (at another exception the script died
            of) or ``end`` (after the script's last statement, or at the last step of
            ``--steps``).
        step: the step of that moment (the last step seen, for ``oom``/``exception``/``end``).
        used: device -> the memory reading at that step boundary (empty when none).
        tensor_bytes: bytes of all live tensor storages the census found.
        storages: the largest storages (and the largest no module or optimizer owns),
            largest first.
        walked: objects the holder walk visited.
        complete: the walk visited everything the script's variables reach (False: it
            stopped at its budget, so "no path found" is not proof).
        lines: the allocating stacks were recorded (``torchmem doctor --lines``).
        note: a sentence for the report (e.g. why this moment stands for the end).
    """

    when: str
    step: int = field(default=0, metadata=NON_NEGATIVE)
    used: dict[str, int] = field(default_factory=dict, metadata=bounds(min=0, max_items=1024))
    tensor_bytes: int = field(default=0, metadata=NON_NEGATIVE)
    storages: tuple[HeldStorage, ...] = field(default=(), metadata=bounds(max_items=1000))
    walked: int = field(default=0, metadata=NON_NEGATIVE)
    complete: bool = True
    lines: bool = False
    note: str | None = None
