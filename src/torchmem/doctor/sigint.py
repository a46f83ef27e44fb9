"""Ctrl-C reaches the script even when it lands in torchmem's own code.

Python raises ``KeyboardInterrupt`` in whatever Python code the main thread runs when
SIGINT is handled. While the doctor watches a script, some of that code is torchmem's
(or torch's, called by torchmem),
and some of it runs where an exception cannot get out: a ``gc.callbacks`` function, a
weak reference's callback (their exceptions are printed as "ignored" and dropped). An
interrupt that lands there is lost: the script runs on after the user pressed Ctrl-C.

:class:`SigintGuard` puts a handler in front while the script runs: when the interrupted
frame is the script's (or any code but torchmem's), it raises ``KeyboardInterrupt`` there,
as Python's own handler does; when it is torchmem's, it sends the signal again a moment
later (:data:`RETRY_S`), until it lands outside torchmem. Installed only in the main
thread, and only when SIGINT has Python's default handler (a handler the script or its
launcher set is left alone, and one the script sets while running replaces this one).
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any, Callable

__all__ = ["SigintGuard", "RETRY_S"]

#: seconds before an interrupt that landed in torchmem's code is sent again
RETRY_S = 0.02
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _ours(frame: FrameType | Any | None, is_user: Callable[[str], bool]) -> bool:
    """Whether ``frame`` runs inside torchmem's code: walking outwards, a frame of torchmem
    comes before any frame of the script (torch code that torchmem called counts as
    torchmem's; torch code the script called, as the script's)."""
    while frame is not None:
        code = getattr(frame, "f_code", None)
        if code is None:
            return False
        if code.co_filename.startswith(_PACKAGE):
            return True
        if is_user(code.co_filename):
            return False
        frame = getattr(frame, "f_back", None)
    return False


class SigintGuard:
    """See the module docstring: ``install()`` before the script runs, ``restore()``
    after it ended (an interrupt still pending then is dropped: the script is over)."""

    def __init__(self, is_user: Callable[[str], bool]) -> None:
        self._is_user = is_user
        self._previous: Any = None
        self._timer: threading.Timer | None = None
        self._lock = threading.RLock()  # the handler may run inside restore()
        self.installed = False
        self.deferred = 0

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                return
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except (ValueError, OSError, AttributeError):
            return
        self.installed = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not _ours(frame, self._is_user):
            raise KeyboardInterrupt
        with self._lock:
            if not self.installed:
                return
            self.deferred += 1
            self._timer = threading.Timer(RETRY_S, self._again)
            self._timer.daemon = True
            self._timer.start()

    def _again(self) -> None:
        with self._lock:
            if not self.installed:
                return
            # to the main thread itself, so that a call it is blocked in (a sleep, a wait
            # on a queue) is interrupted, as the first signal would have done
            if hasattr(signal, "pthread_kill"):
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            else:
                signal.raise_signal(signal.SIGINT)

    def restore(self) -> None:
        with self._lock:
            if not self.installed:
                return
            self.installed = False
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            try:
                if signal.getsignal(signal.SIGINT) == self._handle:  # a new bound method each time
                    signal.signal(signal.SIGINT, self._previous)
            except (ValueError, OSError, TypeError):
                pass
