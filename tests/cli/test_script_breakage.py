"""Scripts that do odd things to the process still get Python's exit code, no torchmem
traceback and a written capture: they close stdout/stderr, raise an exception whose
``__str__`` raises, clear ``sys.path``, leave work for atexit handlers and threads, get
SIGTERM, or swallow the ``--steps`` stop with a bare ``except:``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BROKEN = {
    "closes_stdout": "import sys\nprint('hi')\nsys.stdout.close()\n",
    "closes_stderr": "import sys\nsys.stderr.close()\n",
    "bad_str": "class Bad(Exception):\n    def __str__(self):\n        raise ValueError('no')\n"
               "raise Bad()\n",
    "clears_path": "import sys\nsys.path.clear()\n",
    "exit_message": "import sys\nsys.exit('bad config')\n",
}


def torchmem(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchmem", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def own_frames(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if line.strip().startswith("File ") and f"torchmem{os.sep}" in line]


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_script_that_breaks_the_process_state(tmp_path, name):
    (tmp_path / "s.py").write_text(BROKEN[name])
    python = subprocess.run([sys.executable, "s.py"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    proc = torchmem("doctor", "--growth-only", "--json", "c.json", "s.py", cwd=tmp_path)
    assert proc.returncode == python.returncode, proc.stderr
    assert not own_frames(proc.stderr), proc.stderr
    capture = json.loads((tmp_path / "c.json").read_text())
    assert capture["exit_code"] == python.returncode
    if name == "bad_str":
        assert capture["outcome"] == "exception"
        assert capture["error"] == "Bad: <exception str() failed>"  # as Python prints it
        assert "<exception str() failed>" in proc.stderr
    if name == "exit_message":
        assert (capture["outcome"], capture["error"]) == ("exit", "SystemExit: bad config")
        assert proc.stderr.count("bad config") == python.stderr.count("bad config") == 1


def test_atexit_handler_sees_the_scripts_globals(tmp_path):
    (tmp_path / "s.py").write_text(textwrap.dedent("""
        import atexit, json
        results = {"loss": 0.5}
        def save():
            with open("results.json", "w") as fh:
                fh.write(json.dumps(results))
        atexit.register(save)
        """))
    proc = torchmem("run", "--quiet", "s.py", cwd=tmp_path)
    assert proc.returncode == 0 and "NameError" not in proc.stderr, proc.stderr
    assert json.loads((tmp_path / "results.json").read_text()) == {"loss": 0.5}


def test_a_thread_still_running_sees_the_scripts_globals(tmp_path):
    (tmp_path / "s.py").write_text(textwrap.dedent("""
        import queue, threading, time
        q = queue.Queue()
        def writer():
            with open("lines.txt", "w") as fh:
                for _ in range(50):
                    fh.write(f"{q.get()}\\n")
                    time.sleep(0.002)
        threading.Thread(target=writer).start()
        for i in range(50):
            q.put(i)
        """))
    proc = torchmem("doctor", "--growth-only", "s.py", cwd=tmp_path)
    assert proc.returncode == 0 and "NameError" not in proc.stderr, proc.stderr
    assert (tmp_path / "lines.txt").read_text().split() == [str(i) for i in range(50)]


def test_backward_twice_shows_no_torchmem_frame(tmp_path):
    (tmp_path / "s.py").write_text("import torch\nw = torch.randn(3, requires_grad=True)\n"
                                   "loss = (w * w).sum()\nloss.backward()\nloss.backward()\n")
    proc = torchmem("run", "--quiet", "s.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "Trying to backward through the graph a second time" in proc.stderr
    assert 's.py", line 5' in proc.stderr
    assert not own_frames(proc.stderr), proc.stderr


LOOP = """
import sys, time, torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = 0
while True:
    try:
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        print(f"step {step}", flush=True)
        time.sleep(0.02)
    except CAUGHT:
        pass
    step += 1
"""


def _start(tmp_path: Path, caught: str, *args: str) -> subprocess.Popen[str]:
    (tmp_path / "loop.py").write_text(LOOP.replace("CAUGHT", caught))
    return subprocess.Popen([sys.executable, "-m", "torchmem", *args, "loop.py"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _after_steps(proc: subprocess.Popen[str], n: int) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    seen = 0
    while seen < n and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line.startswith("step ")
    assert seen == n


@pytest.mark.parametrize("caught", ["ZeroDivisionError", "BaseException"])
def test_sigterm_writes_the_report_and_the_capture(tmp_path, caught):
    proc = _start(tmp_path, caught, "doctor", "--growth-only", "--json", "c.json")
    try:
        _after_steps(proc, 3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "exit code 143" in err and "SIGTERM" in err
    assert not own_frames(err), err
    capture = json.loads((tmp_path / "c.json").read_text())
    assert capture["outcome"] == "terminated" and capture["exit_code"] == 143
    assert len(capture["steps"]) >= 3


def test_the_scripts_own_sigterm_handler_is_left_alone(tmp_path):
    (tmp_path / "s.py").write_text(textwrap.dedent("""
        import os, signal, sys
        def handler(signum, frame):
            sys.exit(7)
        signal.signal(signal.SIGTERM, handler)
        os.kill(os.getpid(), signal.SIGTERM)
        """))
    proc = torchmem("run", "--json", "c.json", "s.py", cwd=tmp_path)
    assert proc.returncode == 7, proc.stderr
    assert json.loads((tmp_path / "c.json").read_text())["outcome"] == "exit"


def test_steps_stop_a_loop_with_a_bare_except(tmp_path):
    (tmp_path / "loop.py").write_text(LOOP.replace(" CAUGHT", "").replace("while True:",
                                                                     "while step < 300:")
                                      + "print('after the loop')\n")
    proc = torchmem("run", "--steps", "4", "--json", "c.json", "loop.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # stopped in step 4's opt.step(): its print and everything after never run
    assert proc.stdout == "step 0\nstep 1\nstep 2\n"
    capture = json.loads((tmp_path / "c.json").read_text())
    assert capture["outcome"] == "max_steps" and len(capture["steps"]) == 4
