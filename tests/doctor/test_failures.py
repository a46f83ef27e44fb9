"""However the script ends, ``torchmem doctor`` reports what ran and exits with the script's code.

Each case runs the real CLI in a subprocess (``python -m torchmem doctor --json ...``) on a
small training loop that fails at step 9 in a different way. Unreadable scripts get one
line and exit code 2, never a traceback. The cases run two at a time to keep this fast.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

LOOP = '''\
import sys
import torch
import torch.nn as nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
torch.manual_seed(0)
model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
kept = []
for step in range(12):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    kept.append(torch.randn(64, 1024))
    print(f"step {step}", flush=True)
    if step == 8:
        if MODE == "raise":
            raise ValueError("bad batch 8")
        if MODE == "exit":
            sys.exit(3)
        if MODE == "kbd":
            raise KeyboardInterrupt
        if MODE == "memerr":
            raise MemoryError("cannot allocate 10 GiB")
        if MODE == "oom":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 10.00 GiB")
print("done")
'''

# mode -> (exit code, outcome, words the report must contain)
CASES = {
    "ok": (0, "ok", "exit code 0"),
    "raise": (1, "exception", "raised ValueError: bad batch 8"),
    "exit": (3, "exit", "sys.exit(3)"),
    "kbd": (130, "interrupt", "interrupted"),
    "memerr": (1, "oom", "ran out of memory: MemoryError"),
    "oom": (1, "oom", "ran out of memory: OutOfMemoryError"),
}
TIMEOUT = 600


def _doctor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchmem", "doctor", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("failures")
    (root / "loop.py").write_text(LOOP, encoding="utf-8")

    def one(mode: str):
        proc = _doctor("--json", f"{mode}.json", "loop.py", mode, cwd=root)
        capture = root / f"{mode}.json"
        data = json.loads(capture.read_text(encoding="utf-8")) if capture.exists() else None
        return mode, (proc, data)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, CASES))


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(CASES))
def test_report_and_exit_code(mode, runs):
    code, outcome, words = CASES[mode]
    proc, capture = runs[mode]
    assert proc.returncode == code, proc.stderr[-2000:]
    expected_steps = 12 if mode == "ok" else 9
    # the script's own stdout is untouched
    assert proc.stdout.splitlines()[:expected_steps] == [f"step {i}" for i in range(expected_steps)]
    assert ("done" in proc.stdout) == (mode == "ok")
    # the report is printed (on stderr) and says how the script ended
    assert "torchmem doctor" in proc.stderr
    assert words in proc.stderr
    # and the capture is written, with the steps that ran
    assert capture is not None
    assert capture["outcome"] == outcome
    assert capture["exit_code"] == code
    assert len(capture["steps"]) == expected_steps
    if mode in ("raise", "memerr", "oom"):
        # the script's own traceback is shown, like python would
        assert "Traceback (most recent call last)" in proc.stderr
        assert capture["error"]


@pytest.mark.slow
def test_sigint_from_outside(tmp_path):
    script = tmp_path / "forever.py"
    script.write_text(LOOP.replace("range(12)", "range(10**9)").replace(
        "    print(f\"step {step}\", flush=True)\n",
        "    print(f\"step {step}\", flush=True)\n    __import__('time').sleep(0.05)\n"),
        encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "torchmem", "doctor", "--json", "c.json",
                             "forever.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        seen = 0
        deadline = time.monotonic() + TIMEOUT
        while seen < 5 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line.startswith("step ")
        assert seen == 5
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (130, -signal.SIGINT), err[-2000:]
    assert "interrupted" in err
    capture = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    assert capture["outcome"] == "interrupt"
    assert len(capture["steps"]) >= 5


@pytest.mark.parametrize("name, body, words", [
    ("missing.py", None, "script not found"),
    ("syntax.py", b"def f(:\n    pass\n", "syntax error"),
    ("latin.py", b'x = "\xff\xfe caf\xe9"\n', "cannot decode"),
    ("folder", "dir", "script"),
])
def test_unreadable_scripts_get_one_line(tmp_path, name, body, words):
    if body == "dir":
        (tmp_path / name).mkdir()
    elif body is not None:
        (tmp_path / name).write_bytes(body)
    proc = _doctor(name, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[0].startswith("torchmem doctor: error: ")
    assert words in lines[0]
    assert len(lines) <= 2 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_bad_doctor_arguments(tmp_path):
    for args, words in [(["--steps", "0", "x.py"], "--steps"), ([], "")]:
        proc = _doctor(*args, cwd=tmp_path)
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr
        assert words in proc.stderr
