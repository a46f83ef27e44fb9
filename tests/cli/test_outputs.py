"""Output files of ``torchmem run/doctor/report``: never an input, never twice, checked
before the run, resolved where torchmem started, written atomically with the umask."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from torchmem.model.capture import Capture, StepRecord

SCRIPT = "open('ran.txt', 'w').write('yes')\n"


def torchmem(*args: str, cwd: Path, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run([sys.executable, "-m", "torchmem", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, preexec_fn=set_umask)


def one_line_error(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    first = proc.stderr.splitlines()[0]
    assert " error: " in first and words in first, proc.stderr


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.py"
    path.write_text(SCRIPT)
    return path


@pytest.fixture()
def capture_file(tmp_path: Path) -> Path:
    capture = Capture(tool="torchmem run", version="0.1.0", argv=("t.py",),
                      started_at="2026-01-01T00:00:00Z", duration_s=1.0, exit_code=0,
                      outcome="ok", step_source="optimizer", devices=("cpu",),
                      steps=(StepRecord(step=1, time=0.1, used={"cpu": 100}, rss=200),),
                      peak={"cpu": 100})
    return capture.save(tmp_path / "good.json")


@pytest.mark.parametrize("command", ["run", "doctor"])
@pytest.mark.parametrize("args, words", [
    (["--json", "victim.py", "victim.py"], "--json victim.py would overwrite the script"),
    (["--json", "./sub/../victim.py", "victim.py"], "would overwrite the script"),
    (["--json", "link.py", "victim.py"], "would overwrite the script"),
    (["--json", "data.csv", "victim.py", "--data", "data.csv"], "would overwrite the script's"),
    (["--json", "out.json", "victim.py", "--out=out.json"], "would overwrite the script's"),
])
def test_an_output_that_is_an_input_is_refused_before_the_run(victim, tmp_path, command,
                                                              args, words):
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.py").symlink_to("victim.py")
    (tmp_path / "data.csv").write_text("a,b\n")
    proc = torchmem(command, *args, cwd=tmp_path)
    one_line_error(proc, words)
    assert victim.read_text() == SCRIPT and (tmp_path / "data.csv").read_text() == "a,b\n"
    assert not (tmp_path / "ran.txt").exists()  # nothing ran


def test_doctor_json_and_html_on_the_same_file_is_refused(victim, tmp_path):
    proc = torchmem("doctor", "--json", "x.json", "--html", "./x.json", "victim.py", cwd=tmp_path)
    one_line_error(proc, "--json and --html name the same file")
    assert not (tmp_path / "ran.txt").exists()


@pytest.mark.parametrize("args, words", [
    (["good.json", "--html", "good.json"], "--html good.json would overwrite the capture"),
    (["good.json", "--json", "good.json"], "would overwrite the capture"),
    (["good.json", "--html", "r.out", "--json", "r.out"], "name the same file r.out"),
])
def test_report_never_overwrites_its_capture(capture_file, tmp_path, args, words):
    before = capture_file.read_bytes()
    proc = torchmem("report", *args, cwd=tmp_path)
    one_line_error(proc, words)
    assert capture_file.read_bytes() == before
    assert not (tmp_path / "r.out").exists()


def test_an_unwritable_output_is_found_before_the_run(victim, tmp_path):
    (tmp_path / "blocker").write_text("a file, not a folder")
    (tmp_path / "folder.json").mkdir()
    for path, words in [("blocker/cap.json", "cannot write blocker/cap.json: "),
                        ("folder.json", "cannot write folder.json: it is a directory")]:
        proc = torchmem("doctor", "--json", path, "victim.py", cwd=tmp_path)
        one_line_error(proc, words)
        assert not (tmp_path / "ran.txt").exists()


def test_relative_outputs_resolve_where_torchmem_started(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "wander.py").write_text("import os\nos.chdir('elsewhere')\n")
    proc = torchmem("doctor", "--growth-only", "--json", "c.json", "--html", "c.html",
                    "wander.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "c.json").read_text())["tool"] == "torchmem doctor"
    assert (tmp_path / "c.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert not list((tmp_path / "elsewhere").iterdir())


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_honour_the_umask(capture_file, tmp_path, umask, mode):
    proc = torchmem("report", "good.json", "--html", "r.html", "--json", "r.json",
                    cwd=tmp_path, umask=umask)
    assert proc.returncode == 0, proc.stderr
    for name in ("r.html", "r.json"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == mode, name
    assert Capture.load(tmp_path / "r.json") == Capture.load(capture_file)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_run_capture_is_0644_under_umask_022(tmp_path):
    (tmp_path / "t.py").write_text("x = 1\n")
    proc = torchmem("run", "--json", "c.json", "t.py", cwd=tmp_path, umask=0o022)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(os.stat(tmp_path / "c.json").st_mode) == 0o644


def test_a_symlinked_output_is_written_through_and_an_existing_mode_kept(capture_file, tmp_path):
    real = tmp_path / "shared" / "report.json"
    real.parent.mkdir()
    real.write_text("old")
    real.chmod(0o640)
    (tmp_path / "link.json").symlink_to(real)
    proc = torchmem("report", "good.json", "--json", "link.json", cwd=tmp_path, umask=0o022)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "link.json").is_symlink()
    assert Capture.load(real) == Capture.load(capture_file)
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
