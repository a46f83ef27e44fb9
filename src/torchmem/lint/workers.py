"""Worker processes for ``torchmem lint`` that never outlive the command.

:func:`map_in_workers` runs a function over a list in a
:class:`~concurrent.futures.ProcessPoolExecutor`, with three guarantees a plain pool
does not give:

- **SIGTERM / SIGINT in the parent**: while the workers run, SIGTERM raises
  :class:`Terminated` (a :class:`KeyboardInterrupt`) in the parent, as SIGINT raises
  ``KeyboardInterrupt``; either way the workers are terminated and reaped before the
  exception propagates (the CLI then exits with 143 or 130). A SIGTERM handler that the
  host program installed itself is left alone.
- **the parent dies without cleaning up** (SIGKILL, ``os._exit``, a crash): each worker
  runs a small thread that notices that its parent changed (``os.getppid()``, checked
  every :data:`WATCH_INTERVAL_S` seconds) and exits. This works on every POSIX system
  and with every start method (under ``forkserver`` the parent is the fork server, which
  exits with the main process).
- **Ctrl-C in a terminal** reaches the whole process group: workers ignore SIGINT, so
  only the parent reacts (one message, no traceback per worker).

Example:
    >>> map_in_workers(abs, [-1, -2], workers=2)  # doctest: +SKIP
    [1, 2]

Known limitations:
    On Windows the parent-death watch cannot tell a dead parent (``getppid`` keeps the old
    id); the SIGINT/SIGTERM cleanup still applies.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["WATCH_INTERVAL_S", "Terminated", "map_in_workers", "signals_deferred"]

T = TypeVar("T")
R = TypeVar("R")

#: how often a worker checks that its parent is still alive
WATCH_INTERVAL_S = 0.25


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while lint workers were running.

    Attributes:
        signum: the signal number.
        exit_code: the conventional exit status, ``128 + signum`` (143 for SIGTERM).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum
        self.exit_code = 128 + signum


def _watch_parent(ppid: int) -> None:
    while True:
        time.sleep(WATCH_INTERVAL_S)
        if os.getppid() != ppid:
            os._exit(1)  # the parent is gone: nobody will read our results


def _worker_init() -> None:
    # inherited (fork) handlers of the parent must not run here
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True,
                     name="torchmem-parent-watch").start()


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While active (main thread only), SIGTERM raises :class:`Terminated`."""
    if (threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "SIGTERM")
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGTERM and SIGINT back for the duration (POSIX; a no-op elsewhere).

    Used around writing a fixed file so that a kill lands before or after the write,
    never in the middle of it.
    """
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        yield
        return
    held = {signal.SIGTERM, signal.SIGINT}
    old = mask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, old)


def _stop(pool: Any) -> None:
    """Terminate and reap the pool's workers now (whatever they are doing)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        try:
            proc.terminate()
        except (OSError, ValueError, AttributeError):
            pass
    deadline = time.monotonic() + 2.0
    for proc in processes:
        try:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
        except (OSError, ValueError, AttributeError, AssertionError):
            pass


def map_in_workers(fn: Callable[[T], R], items: Sequence[T], *, workers: int,
                   chunksize: int = 1) -> list[R]:
    """``[fn(x) for x in items]`` in ``workers`` processes that die with the caller.

    Args:
        fn: a picklable top-level function.
        items: picklable arguments.
        workers: number of worker processes.
        chunksize: items sent to a worker at a time.

    Returns:
        The results, in the order of ``items``.

    Raises:
        Terminated: SIGTERM arrived (the workers are already stopped).
        KeyboardInterrupt: SIGINT arrived (the workers are already stopped).
        OSError, RuntimeError: processes cannot be started here (callers fall back to
            running in-process).
    """
    from concurrent.futures import ProcessPoolExecutor

    with _sigterm_raises():
        pool = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init)
        try:
            results = list(pool.map(fn, items, chunksize=chunksize))
        except BaseException:
            _stop(pool)
            raise
        pool.shutdown(wait=True)
    return results
