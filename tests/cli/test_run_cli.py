"""``torchmem run`` through the real console entry point, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(12):
    x = torch.randn(64, 16)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"{step} {loss.item():.10f}")
if sys.argv[1:] == ["fail"]:
    sys.exit(3)
"""


def torchmem(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchmem", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT))
    return path


def test_run_keeps_stdout_identical_and_reports_on_stderr(script, tmp_path):
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    proc = torchmem("run", "--json", "cap.json", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout  # bit-for-bit: same losses printed
    assert "torchmem run: train.py: 12 steps (optimizer.step() calls)" in proc.stderr
    assert "growth/step" in proc.stderr and "memory timeline" in proc.stderr
    data = json.loads((tmp_path / "cap.json").read_text())
    assert data["schema_version"] == 1 and data["tool"] == "torchmem run"
    assert len(data["steps"]) == 12 and data["step_source"] == "optimizer"
    assert data["peak"]["cpu"] >= max(s["used"]["cpu"] for s in data["steps"])


def test_run_exits_with_the_scripts_code_and_passes_its_arguments(script, tmp_path):
    proc = torchmem("run", "--steps", "5", "train.py", "fail", cwd=tmp_path)
    assert proc.returncode == 0  # stopped at step 5, before sys.exit(3)
    assert "stopped cleanly after 5 steps" in proc.stderr
    proc = torchmem("run", "train.py", "fail", cwd=tmp_path)
    assert proc.returncode == 3
    assert "sys.exit(3)" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["run"], "expected a script to run"),
    (["run", "missing.py"], "script not found: missing.py"),
    (["run", "--steps", "0", "train.py"], "--steps must be at least 1"),
    (["run", "--bogus", "train.py"], "unrecognized arguments: --bogus"),
    (["nosuchcommand"], "unknown command"),
])
def test_usage_errors_are_one_line_with_exit_2(script, tmp_path, args, message):
    proc = torchmem(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unwritable_json_path_is_an_error_line_not_a_traceback(script, tmp_path):
    (tmp_path / "blocker").write_text("a file, not a folder")
    proc = torchmem("run", "--json", "blocker/cap.json", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "cannot write blocker/cap.json" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_version_and_help():
    here = Path.cwd()
    assert torchmem("--version", cwd=here).stdout.startswith("torchmem ")
    out = torchmem("--help", cwd=here).stdout
    for command in ("doctor", "run", "report", "lint"):
        assert command in out


@pytest.mark.parametrize("command", ["run", "doctor"])
def test_broken_script_is_reported_before_torch_is_imported(tmp_path, command):
    """The one-line error comes first: no torch import (and none of its warnings)."""
    (tmp_path / "broken.py").write_text("def f(:\n")
    code = (
        "import sys\n"
        "from torchmem.cli import main\n"
        f"rc = main([{command!r}, 'broken.py'])\n"
        "print(rc, 'torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.split() == ["2", "False"], proc.stderr
    assert proc.stderr.startswith(f"torchmem {command}: error: syntax error")


def test_rank_paths_under_torchrun():
    from torchmem.cli._script_args import rank_path

    assert rank_path("run.json", {}) == "run.json"
    assert rank_path("run.json", {"RANK": "0", "WORLD_SIZE": "1"}) == "run.json"
    assert rank_path("out/run.json", {"RANK": "3", "WORLD_SIZE": "4"}) == "out/run.rank3.json"
    assert rank_path("run-{rank}.json", {"RANK": "2", "WORLD_SIZE": "4"}) == "run-2.json"
    assert rank_path("run-{rank}.json", {}) == "run-0.json"
    assert rank_path("report", {"RANK": "1", "WORLD_SIZE": "2"}) == "report.rank1"


def test_each_torchrun_rank_writes_its_own_capture(tmp_path):
    """Two ranks given the same --json path write two files, each naming its rank."""
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(10)\n")
    for rank in ("0", "1"):
        env = {**os.environ, "RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": "2"}
        proc = subprocess.run([sys.executable, "-m", "torchmem", "run", "--json", "run.json",
                               "train.py"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"capture written to run.rank{rank}.json" in proc.stderr
    assert not (tmp_path / "run.json").exists()
    for rank in ("0", "1"):
        data = json.loads((tmp_path / f"run.rank{rank}.json").read_text())
        assert data["environment"]["rank"] == rank and data["environment"]["world_size"] == "2"
