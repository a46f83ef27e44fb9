"""Shared test configuration: the ``cuda`` marker skips without a CUDA device, and torch
runs one intra-op thread per test process.

The suite runs as ``pytest -n 2``: two worker processes, each starting scripts in
subprocesses. With torch's default of one OpenMP thread per core in every one of them, the
threads outnumber the cores and spin waiting for each other: ``python -m pytest -q -n 2
--dist loadfile tests/doctor/test_probe.py tests/doctor/test_verify.py`` took 195 s that
way and 90 s with ``OMP_NUM_THREADS=1`` on a 2-core machine. The variable is
set before torch is imported here and is inherited by the workers and by every script the
tests start; a value the caller sets is kept.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # lint tests run without torch
        return False
    return bool(torch.cuda.is_available())


def pytest_configure(config: pytest.Config) -> None:
    # a plugin may have imported torch before this file: set its thread count as well
    torch = sys.modules.get("torch")
    threads = os.environ["OMP_NUM_THREADS"]
    if torch is not None and threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    # pytest-randomly names its seed only in the header, which -q hides: say it at the end
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.has_plugin("randomly"):
        terminalreporter.write_line(
            f"test order: python -m pytest -q -n 2 --dist loadfile -p randomly "
            f"--randomly-seed={seed}")
