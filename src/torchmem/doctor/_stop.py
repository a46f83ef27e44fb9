"""Stopping a script that does not want to stop: ``--steps`` reached, or SIGTERM.

A stop is an exception raised in the script's thread: :class:`StopRun` at a step
boundary, :class:`Terminated` from a SIGTERM handler. Both are ``BaseException`` so
``except Exception`` lets them pass, and the script's ``finally`` blocks and context
managers run. A bare ``except:`` (or ``except BaseException``) swallows them, though, and
the loop would carry on in a state the script never meant (the step that was cut short
skipped its ``zero_grad()``). So a stop *sticks* (:class:`Stopper`):

* every following step boundary raises it again;
* once raised, the user frames on the stack (up to the runner) get a frame-local line
  trace (``frame.f_trace``, the mechanism ``pdb`` uses) that raises it again at the
  first line that runs while it is *not* being handled: a ``finally`` block or an
  ``except`` handler that is running because of the stop runs in full (``sys.exc_info()``
  is the stop there), and the line after a handler that swallowed it raises it again,
  now outside that ``try``. Lines inside a ``finally:`` clause never raise (found by
  parsing the script's source once), so cleanup code always runs;
* a trace function that raises is switched off by CPython, so each stop exception re-arms
  the trace when it is destroyed, which is when a handler that swallowed it ends.

The global trace function installed for this returns ``None`` (new frames are not
traced); it is installed only after a stop, only in the runner's own thread, never when a
debugger or coverage tracer is already installed (then only the step boundaries re-raise),
and removed when the script ends.

Known limitations:
    * A handler that keeps the stop exception alive (``except BaseException as e:
      errors.append(e)``) and has no more step boundaries after it is not stopped.
    * Code running in other threads is not stopped.
"""

from __future__ import annotations

import ast
import linecache
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, Callable, NoReturn

__all__ = ["StopRun", "Terminated", "Stopper", "SigtermHandler", "SIGTERM_EXIT_CODE"]

#: What ``torchmem run``/``doctor`` exit with after a SIGTERM: 128 + 15, what a shell
#: reports for a process killed by SIGTERM (``$?``), after the report is written.
SIGTERM_EXIT_CODE = 128 + int(signal.SIGTERM)


class _StopBase(BaseException):
    """A stop that re-arms its :class:`Stopper` when a handler that swallowed it ends."""

    _stopper: "Stopper | None" = None

    def __del__(self) -> None:
        stopper = self._stopper
        if stopper is not None:
            self._stopper = None
            try:
                stopper.rearm(sys._getframe(1))
            except Exception:  # noqa: BLE001 - never let a finaliser fail
                pass


class StopRun(_StopBase):
    """Raised inside the script to stop it cleanly (``--steps`` reached).

    A ``BaseException`` so that the script's own ``except Exception`` blocks let it pass;
    its ``finally`` blocks and context managers still run.
    """


class Terminated(_StopBase):
    """Raised inside the script when the process gets SIGTERM (``torchmem run/doctor``)."""


class Stopper:
    """Raises a stop in the script's thread, and keeps raising it until the script ends.

    Args:
        is_user_file: which frames are the script's (only those are traced).
    """

    def __init__(self, is_user_file: Callable[[str], bool]) -> None:
        self._is_user_file = is_user_file
        self.kind: type[_StopBase] | None = None
        self.message = ""
        self.active = False
        self._root: FrameType | None = None
        self._thread = 0
        self._frames: list[FrameType] = []
        self._installed = False
        #: gives up torchmem's own loop tracing (True if it was installed) so a stop can trace
        self.release_trace: Callable[[], bool] | None = None

    def start(self, root: FrameType) -> None:
        """The script starts now; ``root`` is the runner's frame (tracing stops there)."""
        self._root = root
        self._thread = threading.get_ident()
        self.active = True

    @property
    def requested(self) -> bool:
        """Whether a stop was raised at least once."""
        return self.kind is not None

    def stop(self, kind: type[_StopBase], message: str, frame: FrameType | None) -> NoReturn:
        """Raise ``kind(message)`` now and make it stick (``frame``: where it is raised)."""
        if self.kind is not Terminated:  # a SIGTERM wins over --steps
            self.kind, self.message = kind, message
        self.rearm(frame)
        raise self._new()

    def _new(self) -> _StopBase:
        kind = self.kind or StopRun
        exc = kind(self.message)
        exc._stopper = self
        return exc

    def rearm(self, frame: FrameType | None) -> None:
        """Trace the user frames from ``frame`` up to the runner, raising the stop at their
        next line that runs while it is not being handled."""
        if not self.active or self.kind is None or threading.get_ident() != self._thread:
            return
        current = sys.gettrace()
        if current is not None and current != self._global and not (
                self.release_trace is not None and self.release_trace()):
            return  # a debugger or coverage owns tracing: step boundaries only
        frames: list[FrameType] = []
        while frame is not None and frame is not self._root:
            if self._is_user_file(frame.f_code.co_filename):
                frames.append(frame)
            frame = frame.f_back
        if frame is None:  # not below the runner: not the script's stack
            return
        for f in frames:
            f.f_trace = self._line
            f.f_trace_lines = True
        self._frames = frames
        sys.settrace(self._global)
        self._installed = True

    def _global(self, frame: FrameType, event: str, arg: Any) -> None:
        return None  # frames that start after the stop are not traced

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if (event == "line" and self.active and not isinstance(sys.exc_info()[1], _StopBase)
                and frame.f_lineno not in _finally_lines(frame.f_code.co_filename)):
            raise self._new()
        return self._line

    def finish(self) -> None:
        """The script ended: remove the trace, never raise again."""
        self.active = False
        if not self._installed:
            return
        self._installed = False
        if sys.gettrace() == self._global:
            sys.settrace(None)
        for f in self._frames:
            try:
                f.f_trace = None
            except (AttributeError, ValueError):
                pass
        self._frames = []


_FINALLY: dict[str, frozenset[int]] = {}


def _finally_lines(filename: str) -> frozenset[int]:
    """Line numbers inside ``finally:`` clauses of ``filename`` (empty if unparsable)."""
    known = _FINALLY.get(filename)
    if known is None:
        lines: set[int] = set()
        try:
            tree = ast.parse("".join(linecache.getlines(filename)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            body = getattr(node, "finalbody", None)
            if body:
                first = body[0].lineno
                if linecache.getline(filename, first - 1).strip().startswith("finally"):
                    first -= 1  # the ``finally:`` line itself
                lines.update(range(first, (body[-1].end_lineno or body[-1].lineno) + 1))
        known = _FINALLY[filename] = frozenset(lines)
    return known


class SigtermHandler:
    """Turns SIGTERM into a clean stop of the script while it runs (like Ctrl-C does).

    Installed only in the main thread, and only when SIGTERM has its default handler (a
    handler the script or its launcher set is left alone). A second SIGTERM while the
    first is being ignored by the script ends the process as a plain SIGTERM would.
    """

    def __init__(self, stopper: Stopper) -> None:
        self._stopper = stopper
        self._previous: Any = None
        self.installed = False
        self.received = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
                return
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        except (ValueError, OSError, AttributeError):
            return
        self.installed = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received or not self._stopper.active:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.received = True
        self._stopper.stop(Terminated, "terminated by SIGTERM", frame)

    def restore(self) -> None:
        if self.installed:
            self.installed = False
            try:
                signal.signal(signal.SIGTERM, self._previous)
            except (ValueError, OSError, TypeError):
                pass
