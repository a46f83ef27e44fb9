"""How a script ended: the :class:`Outcome`, its exit code, and the traceback shown.

Everything here must survive a script that broke its own process state: an exception
whose ``__str__`` raises, a closed ``sys.stdout``/``sys.stderr``.
"""

from __future__ import annotations

import os
import sys
import traceback
import types
from dataclasses import dataclass
from types import FrameType

from torchmem.doctor.steps import UserFrames

__all__ = ["Outcome", "exit_code", "exit_message", "safe_str", "trim_traceback",
           "innermost_user_frame", "print_script_exception", "flush"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def safe_str(obj: object) -> str:
    """``str(obj)``, or a placeholder when ``__str__`` itself raises (as Python prints)."""
    try:
        return str(obj)
    except Exception:  # noqa: BLE001 - the script's object, anything can happen
        return "<exception str() failed>"


@dataclass
class Outcome:
    """How the script ended.

    Attributes:
        kind: ``ok``, ``exception``, ``exit``, ``interrupt``, ``oom``, ``max_steps`` or
            ``terminated`` (SIGTERM).
        exit_code: what ``python script.py`` would have exited with.
        exc: the exception that ended the script (with its traceback), if any.
        frame: for exceptions, the innermost frame of user code in the traceback.
    """

    kind: str
    exit_code: int
    exc: BaseException | None = None
    frame: FrameType | None = None

    @property
    def error(self) -> str | None:
        """One line naming the exception (or the ``sys.exit`` message), or None."""
        if self.exc is None or self.kind in ("ok", "max_steps", "terminated"):
            return None
        if self.kind == "exit":
            return exit_message(self.exc)
        lines = safe_str(self.exc).strip().splitlines()
        first = lines[0] if lines else ""
        name = type(self.exc).__name__
        return f"{name}: {first}" if first else name


def exit_code(exc: SystemExit) -> int:
    """The process exit code ``python`` gives for an uncaught ``SystemExit``."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1  # Python prints the object on stderr and exits 1


def exit_message(exc: BaseException) -> str | None:
    """For ``sys.exit('bad config')``: ``SystemExit: bad config`` (None for int codes)."""
    code = getattr(exc, "code", None)
    if code is None or isinstance(code, int):
        return None
    lines = safe_str(code).strip().splitlines()
    return f"SystemExit: {lines[0]}" if lines else "SystemExit"


def print_exit_message(exc: SystemExit) -> None:
    """Print a non-int ``sys.exit`` argument on stderr, as Python does at exit."""
    if exc.code is not None and not isinstance(exc.code, int):
        try:
            print(safe_str(exc.code), file=sys.stderr)
        except Exception:  # noqa: BLE001 - stderr closed or replaced by the script
            pass


def trim_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without torchmem's own frames (the exec call, the step hooks).

    Torch's and the user's frames are kept in order; only frames whose file is inside
    the torchmem package are left out, wherever they are in the chain.
    """
    kept: list[types.TracebackType] = []
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE + os.sep):
            kept.append(tb)
        tb = tb.tb_next
    new: types.TracebackType | None = None
    for item in reversed(kept):
        new = types.TracebackType(new, item.tb_frame, item.tb_lasti, item.tb_lineno)
    return new


def innermost_user_frame(tb: types.TracebackType | None, frames: UserFrames) -> FrameType | None:
    """The innermost frame of the user's code in ``tb``."""
    found = None
    while tb is not None:
        if frames.is_user_file(tb.tb_frame.f_code.co_filename):
            found = tb.tb_frame
        tb = tb.tb_next
    return found


def flush(stream: object) -> None:
    """Flush a stream the script may have closed or replaced; never raises."""
    try:
        stream.flush()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        pass


def print_script_exception(exc: BaseException) -> None:
    """Print the script's exception as Python would, minus torchmem's frames; never raises.

    Chained exceptions (``__cause__``/``__context__``) keep their own tracebacks, trimmed
    the same way.
    """
    flush(sys.stdout)
    flush(sys.stderr)
    try:
        seen: set[int] = set()
        chain: list[BaseException] = []
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            chain.append(current)
            current = current.__cause__ or current.__context__
        saved = [(e, e.__traceback__) for e in chain]
        try:
            for e, tb in saved:
                e.__traceback__ = trim_traceback(tb)
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        finally:
            for e, tb in saved:
                e.__traceback__ = tb
    except Exception:  # noqa: BLE001 - stderr closed, or a broken exception object
        pass
    flush(sys.stderr)
