"""``torchmem lines`` through the real command line: a script with a known leak and known
allocations, its JSON capture (ranked lines, exact bytes, sums that add up), the HTML
page (annotated source, escaped), what ``torchmem report`` does with it, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchmem.model.capture import Capture

SCRIPT = textwrap.dedent("""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    history = []
    for step in range(8):
        x = torch.randn(32, 64)
        buf = torch.empty(4096)
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        history.append(loss)
    print("done <b>")
""").lstrip()


def _line(text: str) -> int:
    return next(n for n, line in enumerate(SCRIPT.splitlines(), 1) if line.strip() == text)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "torchmem", "lines", *args], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lines")
    script = tmp / "train <x>.py"
    script.write_text(SCRIPT, encoding="utf-8")
    proc = _run(tmp, "--all-steps", "--json", "out.json", "--html", "out.html", str(script))
    return tmp, script, proc


def test_stdout_untouched_report_on_stderr(run):
    _, _, proc = run
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done <b>\n"
    assert "torchmem lines:" in proc.stderr and "history.append(loss)" in proc.stderr
    assert "keeps" in proc.stderr


def test_json_ranks_the_leak_first_with_exact_bytes(run):
    tmp, script, _ = run
    capture = Capture.load(tmp / "out.json")
    assert capture.tool == "torchmem lines"
    first = capture.lines[0]
    assert (first.line, first.code) == (_line("history.append(loss)"), "history.append(loss)")
    assert first.retains is not None and "history" in first.retains
    rows = {r.line: r for r in capture.lines}
    buf = rows[_line("buf = torch.empty(4096)")]
    assert (buf.allocated_bytes, buf.alive_bytes, buf.delta_bytes) == (16384, 16384, 0)
    x = rows[_line("x = torch.randn(32, 64)")]
    assert x.allocated_bytes == 32 * 64 * 4
    profile = capture.line_profile
    assert profile is not None and profile.budget is None
    steps = profile.steady
    assert [w.step for w in steps] == list(range(2, 9))
    # every whole step: the lines' mean net change + the unattributed part = the mean delta
    mean_delta = sum(w.delta_bytes for w in steps) / len(steps)
    total = sum(r.delta_bytes for r in capture.lines) + profile.unattributed_bytes
    assert abs(total - mean_delta) <= len(capture.lines)  # rounding of the means only
    assert all(w.delta_bytes > 0 for w in steps)  # the graphs kept by history
    assert abs(sum(r.peak_share for r in capture.lines) - 1.0) < 0.05


def test_html_has_the_annotated_source_escaped(run):
    tmp, _, _ = run
    page = (tmp / "out.html").read_text(encoding="utf-8")
    assert "Memory per line" in page and "Annotated source" in page
    assert "history.append(loss)" in page and "keeps" in page
    assert "train &lt;x&gt;.py" in page and "train <x>.py" not in page


def test_report_renders_the_capture_again(run):
    tmp, _, _ = run
    proc = subprocess.run([sys.executable, "-m", "torchmem", "report", "out.json", "--html",
                           "again.html"], cwd=tmp, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Memory per line" in (tmp / "again.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("args, message", [
    (["--every", "0"], "--every must be at least 1"),
    (["--budget", "-1"], "--budget must be a fraction"),
    (["--top", "0"], "--top must be at least 1"),
    (["--every", "2", "--all-steps"], "not allowed with argument"),
])
def test_usage_errors(tmp_path, args, message):
    (tmp_path / "s.py").write_text("print(1)\n", encoding="utf-8")
    proc = _run(tmp_path, *args, "s.py")
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_missing_script_is_one_line(tmp_path):
    proc = _run(tmp_path, "missing.py")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("torchmem lines: error:")


def test_script_without_steps_and_its_exit_code(tmp_path):
    (tmp_path / "s.py").write_text("import sys, torch\nx = torch.ones(1000)\nsys.exit(3)\n",
                                   encoding="utf-8")
    proc = _run(tmp_path, "--json", "o.json", "s.py")
    assert proc.returncode == 3, proc.stderr
    data = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))
    rows = {r["line"]: r for r in data["lines"]}
    assert rows[2]["peak_bytes"] == 4000
    assert "no whole training step was profiled" in " ".join(data["line_profile"]["notes"])


def test_allocation_sites_join_the_stack_and_the_holder(run):
    tmp, script, _ = run
    profile = Capture.load(tmp / "out.json").line_profile
    assert profile is not None
    census = [s for s in profile.sites if s.when == "census"]
    kept = [s for s in census if s.holder == "history"]
    assert kept and all(s.nbytes == 4 and s.made_in for s in kept)
    loss_line = _line("loss = model(x).square().mean()")
    assert any(s.stack and (s.stack[0].file, s.stack[0].line) == (str(script), loss_line)
               for s in kept)
    buf = next(s for s in census if s.holder == "buf")
    assert buf.nbytes == 16384 and buf.stack[0].line == _line("buf = torch.empty(4096)")
    weight = next(s for s in profile.sites if s.when == "peak" and s.holder == "weight")
    assert weight.role == "parameter" and weight.made_in == "setup"


OOM_SCRIPT = textwrap.dedent("""
    import torch
    model = torch.nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    cache = []
    for step in range(6):
        loss = model(torch.randn(8, 32)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        cache.append(torch.ones(64, 1024))
    huge = torch.empty(2**62, dtype=torch.uint8)
""").lstrip()


def test_out_of_memory_lists_what_was_alive_where_made_and_who_keeps_it(tmp_path):
    (tmp_path / "oom.py").write_text(OOM_SCRIPT, encoding="utf-8")
    proc = _run(tmp_path, "--all-steps", "--json", "o.json", "oom.py")
    assert proc.returncode == 1 and "DefaultCPUAllocator" in proc.stderr
    assert "alive at the out-of-memory error" in proc.stderr
    capture = Capture.load(tmp_path / "o.json")
    assert capture.outcome == "oom" and capture.line_profile is not None
    oom = [s for s in capture.line_profile.sites if s.when == "oom"]
    kept = [s for s in oom if s.holder == "cache"]
    line = OOM_SCRIPT.splitlines().index("    cache.append(torch.ones(64, 1024))") + 1
    assert kept and all(s.nbytes == 64 * 1024 * 4 for s in kept)
    assert all(s.stack and s.stack[0].line == line for s in kept if s.made_in)
