"""Which lines of the user's code ran: statements in a branch that never runs are not culprits.

The statement named for a culprit is found in the source (:mod:`torchmem.doctor.source`);
two statements that both add to it, one in each branch of an ``if`` (``if self.spiking:
out.append(o[0]) else: out.append(o)``), look the same there. Only one of them keeps
adding when the branch condition does not change, and the source alone cannot say which.

:class:`LineWatch` watches the step after each deep analysis: a global trace function
(``sys.settrace``, this thread only) returns a line tracer for the frames of the user's
files (and sets one on the user frames already on the stack), which records every line
that runs; at the next step boundary it is removed. :class:`LineRuns` is the record, as
plain data: the lines that ran, and the lines of every user code object that was entered
while watching. A line of a code object that was entered, but that never ran in any
watched step, :meth:`LineRuns.did_not_run`; a line of code that was not entered is
unknown (no claim).

Not installed when something already traces the thread (a debugger, coverage, the
doctor's own loop tracer or its ``--steps`` stopper) or a stop was requested: then nothing
is known and no statement is set aside. A stop (SIGTERM) that comes during a watched step
is raised at the next step boundary, where the watch ends, instead of at the next line. The line tracer reads nothing of the frame; on Python < 3.13 the
interpreter copies the frame's locals to its ``f_locals`` dict and back around each call
of it, the same as under any debugger.

Cost while watching (one step after each analysis, about ``2 log2(N)`` steps of N): one
Python call per Python function call, one per line run in the user's files.
"""

from __future__ import annotations

import contextlib
import os
import sys
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any, Callable, Iterator

__all__ = ["LineRuns", "LineWatch", "did_not_run", "observed"]

_CURRENT: ContextVar[LineRuns | None] = ContextVar("torchmem_line_runs", default=None)


@dataclass
class LineRuns:
    """Lines that ran and lines of code entered, per file, over the watched steps."""

    ran: dict[str, set[int]] = field(default_factory=dict)
    entered: dict[str, set[int]] = field(default_factory=dict)

    def did_not_run(self, file: str, line: int) -> bool:
        """Whether ``file:line`` belongs to code that ran while watched, yet never ran."""
        if file not in self.entered:
            file = os.path.realpath(file)
        return line in self.entered.get(file, ()) and line not in self.ran.get(file, ())

    def resolved(self) -> LineRuns:
        """The same record keyed by each file's real path."""
        out = LineRuns()
        for mine, theirs in ((self.ran, out.ran), (self.entered, out.entered)):
            for file, lines in mine.items():
                theirs.setdefault(os.path.realpath(file), set()).update(lines)
        return out


@contextlib.contextmanager
def observed(runs: LineRuns | None) -> Iterator[None]:
    """While inside, :func:`did_not_run` answers from ``runs`` (the diagnosis of one run)."""
    token = _CURRENT.set(runs)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def did_not_run(file: str, line: int) -> bool:
    """Whether the run being diagnosed entered ``file:line``'s code while watched and the
    line never ran (False outside :func:`observed`, and when unknown)."""
    runs = _CURRENT.get()
    return runs is not None and runs.did_not_run(file, line)


class LineWatch:
    """Records the user's lines that run while armed (see the module docstring)."""

    def __init__(self, is_user_file: Callable[[str], bool]) -> None:
        self._is_user_file = is_user_file
        self.runs = LineRuns()
        self._user: dict[CodeType, bool] = {}
        self._entered: set[CodeType] = set()
        self._frames: list[FrameType] = []
        self.armed = False
        # bound once: each attribute access makes a new bound method, and the thread's
        # trace function and the frames' are compared by identity
        self._call_fn = self._global
        self._line_fn = self._line

    def arm(self, frame: FrameType | None) -> bool:
        """Watch from now until :meth:`disarm`; ``frame`` and its callers, the user's ones,
        are traced too. False when something traces the thread already."""
        if self.armed or sys.gettrace() is not None:
            return False
        frames = []
        while frame is not None:
            if self._user_code(frame.f_code):
                self._enter(frame.f_code)
                frame.f_trace = self._line_fn
                frame.f_trace_lines = True
                frames.append(frame)
            frame = frame.f_back
        self._frames = frames
        self.armed = True
        sys.settrace(self._call_fn)
        return True

    def disarm(self) -> None:
        """Stop watching (idempotent)."""
        if not self.armed:
            return
        self.armed = False
        if sys.gettrace() is self._call_fn:
            sys.settrace(None)
        for f in self._frames:
            if f.f_trace is self._line_fn:
                f.f_trace = None
        self._frames = []

    def _user_code(self, code: CodeType) -> bool:
        known = self._user.get(code)
        if known is None:
            known = self._user[code] = bool(self._is_user_file(code.co_filename))
        return known

    def _enter(self, code: CodeType) -> None:
        if code not in self._entered:
            self._entered.add(code)
            self.runs.entered.setdefault(code.co_filename, set()).update(
                ln for _, _, ln in code.co_lines() if ln is not None)

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.armed or not self._user_code(frame.f_code):
            return None
        self._enter(frame.f_code)
        return self._line_fn

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.armed:
            return None
        if event == "line":
            file = frame.f_code.co_filename
            ran = self.runs.ran.get(file)
            if ran is None:
                ran = self.runs.ran[file] = set()
            ran.add(frame.f_lineno)
        return self._line_fn
