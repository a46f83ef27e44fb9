"""Where a ``zero_grad()`` that runs once, outside the loop of the steps, sits.

The classic way to never clear gradients is not to forget ``zero_grad()`` but to call it
once, before the loop::

    def train(self):
        self.optimizers.zero_grad()          # runs once
        while self.step < self.num_steps:
            self.train_step(batch)           # backward() and optimizer.step() every time

The line to change is that call, and the name is what it is called on
(``self.optimizers``), not the ``optimizer.step()`` deep in a helper. :class:`ZeroGradSite`
keeps the user frames of the latest ``zero_grad()`` call (their identity, code and line;
no frame and no local is kept). When a gradient check then finds that no ``zero_grad()``
ran between two steps, :meth:`ZeroGradSite.outside` looks for the innermost of those
frames that is still running under the step, with the same code: the function whose loop
runs the steps, and the ``zero_grad()`` statement it ran before that loop.
"""

from __future__ import annotations

import linecache
import re
from types import CodeType, FrameType
from typing import Callable

__all__ = ["ZeroGradSite", "receiver"]

#: user frames kept per call (innermost first)
MAX_FRAMES = 32


def _user_frames(frame: FrameType | None, is_user: Callable[[str], bool]
                 ) -> list[tuple[int, CodeType, int]]:
    out: list[tuple[int, CodeType, int]] = []
    while frame is not None and len(out) < MAX_FRAMES:
        if is_user(frame.f_code.co_filename):
            out.append((id(frame), frame.f_code, frame.f_lineno))
        frame = frame.f_back
    return out


def receiver(code: str) -> str | None:
    """What ``.zero_grad(`` is called on in ``code`` (``self.optimizers``), or None."""
    m = re.search(r"([\w.\[\]'\"]+)\.zero_grad\s*\(", code)
    return m.group(1) if m else None


class ZeroGradSite:
    """The frames of the latest ``zero_grad()`` call (see the module docstring)."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, CodeType, int]] = []

    def record(self, frame: FrameType | None, is_user: Callable[[str], bool]) -> None:
        self._stack = _user_frames(frame, is_user)

    def reset(self) -> None:
        self._stack = []

    def outside(self, step_frame: FrameType | None, is_user: Callable[[str], bool]
                ) -> tuple[str, int, str, str] | None:
        """(file, line, code, function) of the ``zero_grad()`` statement in the innermost
        frame that ran it and is still running under ``step_frame``, when that statement is
        not the one the step runs under there (it ran before, outside the steps' loop);
        None when no such frame is found."""
        running = {(fid, code): line for fid, code, line in _user_frames(step_frame, is_user)}
        for fid, code, line in self._stack:
            now = running.get((fid, code))
            if now is None:
                continue
            if now == line:
                return None
            return code.co_filename, line, linecache.getline(code.co_filename, line).strip(), \
                code.co_name
        return None
