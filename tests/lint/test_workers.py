"""Killing ``torchmem lint`` leaves no worker process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from torchmem.lint.files import PARALLEL_MIN_BYTES
from torchmem.lint.workers import map_in_workers

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

FUNC = ("def f{i}(x):\n    y = x.data\n    for _ in range(3):\n        z = torch.ones(4)\n"
        "        y = y + z\n    return y\n")


def _project(root: Path) -> Path:
    body = "import torch\n" + "".join(FUNC.format(i=i) for i in range(300))
    files = max(8, 4 * PARALLEL_MIN_BYTES // len(body))  # well above the parallel threshold
    src = root / "src"
    src.mkdir()
    for n in range(files):
        (src / f"m{n}.py").write_text(body)
    return src


def _workers(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [c for c in proc.children(recursive=True) if "git" not in c.name()]
    except psutil.NoSuchProcess:
        return []


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.parametrize("signum, exit_code", [
    (signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGKILL, -signal.SIGKILL)])
def test_killing_lint_fix_leaves_no_worker(tmp_path, signum, exit_code):
    _project(tmp_path)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "torchmem", "lint", "--isolated", "--fix",
             "--unsafe-fixes", "-j", "2", "src"], cwd=tmp_path, stdout=o, stderr=e,
            start_new_session=True)
    parent = psutil.Process(proc.pid)
    seen: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline and proc.poll() is None:
            seen = _workers(parent)
            time.sleep(0.02)
        assert len(seen) >= 2, "the workers never started"
        if signum == signal.SIGINT:  # Ctrl-C in a terminal: the whole process group
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        assert proc.wait(timeout=30) == exit_code
        grace = time.monotonic() + 5  # the parent-death watch polls every 0.25 s
        while _alive(seen) and time.monotonic() < grace:
            time.sleep(0.1)
        assert _alive(seen) == [], "worker processes survived their parent"
        text = err.read_text()
        assert "Traceback" not in text, text
        if exit_code > 0:
            assert text.splitlines()[-1] in ("torchmem lint: terminated",
                                             "torchmem lint: interrupted")
    finally:
        for p in _alive(seen):
            p.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_map_in_workers_returns_results_in_order_and_restores_sigterm():
    before = signal.getsignal(signal.SIGTERM)
    assert map_in_workers(abs, [-3, 2, -1], workers=2) == [3, 2, 1]
    assert signal.getsignal(signal.SIGTERM) is before
