"""Ctrl-C that lands in torchmem's own code still reaches the script."""

from __future__ import annotations

import signal
import threading
import time
import types

import pytest
import torch

import torchmem.doctor.runner as runner_module
from torchmem.doctor.sigint import SigintGuard

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals are handled in the main thread only")


def _frame_of(*files: str) -> types.SimpleNamespace | None:
    """A stack of frames, innermost first."""
    frame = None
    for file in reversed(files):
        frame = types.SimpleNamespace(f_code=types.SimpleNamespace(co_filename=file),
                                      f_back=frame)
    return frame


def _user(file: str) -> bool:
    return file.endswith("train.py")


def test_an_interrupt_in_torchmem_code_is_sent_again_and_reaches_the_script():
    guard = SigintGuard(_user)
    guard.install()
    try:
        assert guard.installed
        # as if SIGINT were handled while a gc callback of the doctor runs: no exception
        # there (it would be dropped), the signal comes back a moment later
        guard._handle(signal.SIGINT, _frame_of(runner_module.__file__))
        assert guard.deferred == 1
        # torch code that torchmem called is torchmem's too
        guard._handle(signal.SIGINT, _frame_of(torch.__file__, runner_module.__file__,
                                               "/somewhere/train.py"))
        assert guard.deferred == 2
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            time.sleep(5)  # the script's code: it is interrupted here, in the sleep
        assert time.monotonic() - started < 2
    finally:
        guard.restore()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupt_in_the_scripts_code_raises_at_once():
    guard = SigintGuard(_user)
    guard.install()
    try:
        with pytest.raises(KeyboardInterrupt):
            guard._handle(signal.SIGINT, _frame_of("/somewhere/train.py", runner_module.__file__))
        with pytest.raises(KeyboardInterrupt):  # torch code the script called
            guard._handle(signal.SIGINT, _frame_of(torch.__file__, "/somewhere/train.py",
                                                   runner_module.__file__))
        assert guard.deferred == 0
    finally:
        guard.restore()


def test_a_handler_someone_else_set_is_left_alone():
    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGINT, mine)
    try:
        guard = SigintGuard(_user)
        guard.install()
        assert not guard.installed and signal.getsignal(signal.SIGINT) is mine
        guard.restore()
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_pending_resend_is_dropped_when_the_script_is_over():
    guard = SigintGuard(_user)
    guard.install()
    guard._handle(signal.SIGINT, _frame_of(runner_module.__file__))
    guard.restore()
    time.sleep(0.1)  # no KeyboardInterrupt: the re-send was cancelled
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
