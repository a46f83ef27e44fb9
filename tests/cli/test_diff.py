"""``torchmem diff`` through the real CLI: captures recorded by running a real script under
``torchmem doctor --json`` / ``torchmem run --json`` (batch 32 vs 64, a leak added), and
hand-built captures for the refusals."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchmem.cli import main
from torchmem.model.capture import Capture, Culprit, Finding, StepRecord

SCRIPT = """
import sys, torch
batch = int(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
history = []
for step in range(16):
    x = torch.randn(batch, 128)
    y = torch.randint(0, 10, (batch,))
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if "leak" in sys.argv:
        history.append(out.repeat(1, 200))
    print(f"{step} {loss.item():.6f}")
"""
LEAK_LINE = SCRIPT.strip().splitlines().index("        history.append(out.repeat(1, 200))") + 1


def torchmem(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchmem", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """b32.json, b64.json and leak.json (doctor), run32.json (run) of the same script."""
    work = tmp_path_factory.mktemp("diff")
    (work / "train.py").write_text(textwrap.dedent(SCRIPT).lstrip())
    for out, tool, args in (("b32.json", "doctor", ["32"]), ("b64.json", "doctor", ["64"]),
                            ("leak.json", "doctor", ["32", "leak"]),
                            ("run32.json", "run", ["32"])):
        proc = torchmem(tool, "--quiet", "--json", out, "train.py", *args, cwd=work)
        assert proc.returncode == 0, proc.stderr
    return work


@pytest.mark.slow
def test_a_bigger_batch_is_explained_with_its_numbers(runs):
    proc = torchmem("diff", "b32.json", "b64.json", "--json", "d.json", cwd=runs)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("torchmem diff: b32.json -> b64.json")
    assert "train.py 32" in out and "train.py 64" in out
    a, b = Capture.load(runs / "b32.json"), Capture.load(runs / "b64.json")
    other_a, other_b = a.bytes_by_role["other"], b.bytes_by_role["other"]
    assert other_b == pytest.approx(2 * other_a, rel=0.05)  # x, y and out double
    assert "a larger batch, about ×2.00" in out
    assert "an unnamed other float32 tensor (32, 128) -> (64, 128)" in out
    assert "while model state (parameters, gradients, optimizer state) stayed" in out
    data = json.loads((runs / "d.json").read_text())
    assert data["exceeded"] == [] and data["diff"]["explanations"][0]["kind"] == "batch_size"
    roles = {r["key"]: (r["a"], r["b"]) for r in data["diff"]["roles"]}
    assert roles["other"] == (other_a, other_b)
    assert roles["parameter"][0] == roles["parameter"][1] == a.bytes_by_role["parameter"]


@pytest.mark.slow
def test_a_leak_names_the_new_holder_and_fails_the_growth_limit(runs):
    proc = torchmem("diff", "b32.json", "leak.json", "--fail-over", "growth=64KiB", cwd=runs)
    assert proc.returncode == 1, proc.stderr
    leak = Capture.load(runs / "leak.json")
    finding = leak.findings[0]
    assert finding.culprit is not None and finding.culprit.name == "history"
    assert (f"new holder in leak.json: `history` (train.py:{LEAK_LINE}) keeps a retained "
            "autograd graph") in proc.stdout
    assert "memory grows on cpu in leak.json by" in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchmem diff: growth on cpu rose from ")
    assert lines[0].endswith("over the --fail-over growth=64KiB limit")
    # the same comparison within a generous limit, and the other way round, pass
    assert torchmem("diff", "b32.json", "leak.json", "--quiet", "--fail-over", "growth=1GiB",
                    cwd=runs).returncode == 0
    back = torchmem("diff", "leak.json", "b32.json", "--fail-over", "growth=0B",
                    "--fail-over", "0%", cwd=runs)
    assert back.returncode == 0, back.stderr
    assert "`history`" in back.stdout and "no longer keeps a retained autograd graph" in back.stdout


@pytest.mark.slow
def test_the_html_page_has_every_figure_of_the_terminal_report_and_both_runs(runs):
    proc = torchmem("diff", "b32.json", "leak.json", "--html", "d.html", "--json", "d.json",
                    "--fail-over", "growth=64KiB", cwd=runs)
    assert proc.returncode == 1, proc.stderr
    page = (runs / "d.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    data = json.loads((runs / "d.json").read_text())["diff"]
    # the same numbers as the terminal report and the JSON
    for row in data["peak"]:
        assert f"peak {row['key']}" in page
    explanation = data["explanations"][0]["text"].replace("`", "")
    assert explanation.split(":")[0].replace("`", "") in page.replace("`", "")
    assert f"train.py:{LEAK_LINE}" in page and "history" in page and ">new<" in page
    assert "growth on cpu rose from" in page  # the --fail-over line
    # one chart with a dashed line for a and a solid one for b
    svg = page[page.index("<svg"):page.index("</svg>")]
    lines = re.findall(r"<polyline[^>]*>", svg)
    assert len(lines) == 2 and sum("stroke-dasharray" in line for line in lines) == 1
    assert "diff written to d.html" in proc.stderr


def test_the_html_page_escapes_what_the_captures_say(tmp_path):
    capture(name="x").save(tmp_path / "a.json")
    capture(name="<img src=x onerror=alert(1)>\x1b[2J").save(tmp_path / "b.json")
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--quiet",
                 "--html", str(tmp_path / "d.html")]) == 0
    page = (tmp_path / "d.html").read_text(encoding="utf-8")
    assert "<img" not in page and "&lt;img src=x" in page and "\x1b" not in page


def test_the_html_output_may_not_overwrite_an_input_or_the_json(tmp_path, capsys):
    capture().save(tmp_path / "a.json")
    a, out = str(tmp_path / "a.json"), str(tmp_path / "o")
    assert main(["diff", a, a, "--html", a]) == 2
    assert "would overwrite the capture" in capsys.readouterr().err
    assert main(["diff", a, a, "--html", out, "--json", out]) == 2
    assert "--html" in capsys.readouterr().err


@pytest.mark.slow
def test_captures_carry_every_modules_bytes_and_the_diff_uses_them(runs):
    a = Capture.load(runs / "b32.json")
    # parameters, gradients and Adam's two moments of each Linear (4 x its parameter bytes),
    # plus Adam's 0-dim float32 `step` of the weight and of the bias
    assert a.bytes_by_module == {"0": 4 * 4 * (128 * 512 + 512) + 2 * 4,
                                 "2": 4 * 4 * (512 * 10 + 10) + 2 * 4}
    owned = sum(a.bytes_by_role[r] for r in ("parameter", "buffer", "gradient",
                                             "optimizer_state"))
    assert sum(a.bytes_by_module.values()) == owned
    proc = torchmem("diff", "b32.json", "b64.json", "--json", "m.json", "--quiet", cwd=runs)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((runs / "m.json").read_text())["diff"]
    assert data["a"]["module_source"] == "capture"
    assert {r["key"]: r["a"] for r in data["modules"]} == a.bytes_by_module


@pytest.mark.slow
def test_the_peak_limit_in_bytes_and_percent(runs):
    a, b = Capture.load(runs / "b32.json"), Capture.load(runs / "leak.json")
    rise = b.peak["cpu"] - a.peak["cpu"]
    assert rise > 1 << 20  # 16 steps of a 250 KiB graph kept
    over = torchmem("diff", "b32.json", "leak.json", "--quiet", "--fail-over", "1MiB", cwd=runs)
    assert over.returncode == 1
    assert over.stdout == ""
    assert "torchmem diff: peak on cpu rose from" in over.stderr
    pct = 100 * rise / a.peak["cpu"]
    under = torchmem("diff", "b32.json", "leak.json", "--quiet",
                     "--fail-over", f"peak={pct * 1.5:.3f}%", cwd=runs)
    assert under.returncode == 0 and under.stderr == ""


@pytest.mark.slow
def test_the_same_capture_twice_differs_in_nothing(runs):
    proc = torchmem("diff", "b32.json", "b32.json", "--fail-over", "0%",
                    "--fail-over", "growth=0%", cwd=runs)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to explain" in proc.stdout


@pytest.mark.slow
def test_a_run_capture_compares_with_a_doctor_capture(runs):
    proc = torchmem("diff", "run32.json", "b32.json", cwd=runs)
    assert proc.returncode == 0, proc.stderr
    assert "torchmem run" in proc.stdout and "torchmem doctor" in proc.stdout
    assert "growth/step cpu" in proc.stdout


# -- refusals (hand-built captures) ------------------------------------------------------------
def capture(devices: tuple[str, ...] = ("cpu",), name: str = "losses") -> Capture:
    steps = tuple(StepRecord(step=i, time=0.1 * i, used={d: 1000 * i for d in devices})
                  for i in range(1, 11))
    finding = Finding(cause="retained_graph", title="retained autograd graph", bytes=100,
                      culprit=Culprit(name=name, file="t.py", line=3))
    return Capture(tool="torchmem doctor", version="0", argv=("t.py",), started_at="x",
                   duration_s=1.0, exit_code=0, outcome="ok", devices=devices, steps=steps,
                   peak={d: 10_000 for d in devices}, findings=(finding,))


def test_different_devices_are_refused_unless_one_is_chosen(tmp_path, capsys):
    capture(("cpu",)).save(tmp_path / "a.json")
    capture(("cpu", "cuda:0")).save(tmp_path / "b.json")
    code = main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert "measured cpu and" in err and "cpu, cuda:0; expected the same devices" in err
    assert "Tip: --device cpu compares one device both measured" in err
    assert main(["diff", "--device", "cpu", str(tmp_path / "a.json"),
                 str(tmp_path / "b.json")]) == 0
    assert main(["diff", "--device", "cuda:0", str(tmp_path / "a.json"),
                 str(tmp_path / "b.json")]) == 2
    assert "--device cuda:0: " in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    (None, "capture not found"),
    (b"", "expected JSON, got an empty file"),
    (b'{"schema_version": 1, "tool": "torchmem doctor"', "expected JSON, got a parse error"),
    (b'{"schema_version": 99, "tool": "torchmem doctor"}', "this torchmem reads 1..1"),
    (b'{"hello": 1}', "is not a torchmem capture"),
    (pickle.dumps([1, 2]), "refused"),
])
def test_bad_inputs_are_one_line_and_exit_2(tmp_path, capsys, content, message):
    capture().save(tmp_path / "a.json")
    bad = tmp_path / "b.bin"
    if content is not None:
        bad.write_bytes(content)
    code = main(["diff", str(tmp_path / "a.json"), str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("torchmem diff: error: ") and "Traceback" not in err
    if message != "refused":
        assert message in err
    else:  # a pickle: a snapshot, or refused as one this torchmem cannot read
        assert "pickle" in err or "snapshot" in err


@pytest.mark.parametrize("args, message", [
    (["--fail-over", "lots"], "--fail-over: expected a percentage or a byte quantity"),
    (["--fail-over", "memory=5%"], "--fail-over: expected"),
    (["--width", "10"], "--width must be at least 40"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_usage_errors(tmp_path, capsys, args, message):
    capture().save(tmp_path / "a.json")
    code = main(["diff", *args, str(tmp_path / "a.json"), str(tmp_path / "a.json")])
    assert code == 2
    assert message in capsys.readouterr().err


def test_the_json_output_may_not_overwrite_an_input(tmp_path, capsys):
    capture().save(tmp_path / "a.json")
    a = str(tmp_path / "a.json")
    assert main(["diff", a, a, "--json", a]) == 2
    assert "would overwrite the capture" in capsys.readouterr().err


def test_per_line_data_is_a_table_that_fits_the_width(tmp_path, capsys):
    import dataclasses

    from torchmem.model.lines import LineRecord

    def rec(line: int, code: str, made: int, alive: int) -> LineRecord:
        return LineRecord(file="/x/train.py", line=line, code=code, allocated_bytes=made,
                          alive_bytes=alive)
    long = "loss = torch.nn.functional.cross_entropy(model(x_augmented_with_noise), targets)"
    a = dataclasses.replace(capture(), lines=(rec(30, long, 4 << 20, 0),
                                              rec(31, "keep.append(out)", 0, 0)))
    b = dataclasses.replace(capture(), lines=(rec(32, long, 4 << 20, 0),
                                              rec(33, "keep.append(out)", 1 << 20, 8 << 20)))
    a.save(tmp_path / "a.json")
    b.save(tmp_path / "b.json")
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    table = out[out.index("by line"):out.index("what explains")].splitlines()
    assert table[1].split()[:2] == ["train.py:33", "keep.append(out)"]
    assert "0 B / 0 B" in table[1] and "1.0 MiB / 8.0 MiB" in table[1]
    assert table[1].rstrip().endswith("+8.0 MiB")
    assert all(len(line) <= 100 for line in table)
    assert "train.py:33 `keep.append(out)`: allocated 0 B -> 1.0 MiB, alive 0 B -> 8.0 MiB" in out


def test_strings_from_a_capture_cannot_drive_the_terminal(tmp_path, capsys):
    capture(name="x").save(tmp_path / "a.json")
    capture(name="evil\x1b[2J\x1b]52;c;AAAA\x07").save(tmp_path / "b.json")
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b[2J" in out


# -- CUDA snapshots (built from PyTorch's documented format, as in test_snapshot_import) --------
def test_two_snapshots_compare_and_a_capture_with_a_snapshot_is_refused(tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
    try:
        import snapshot_factory as sf
    finally:
        sys.path.pop(0)
    sf.write(tmp_path / "before.pickle", sf.TrainingRun(steps=30, layers=4, leak_every=3,
                                                        empty_cache=True).snapshot())
    sf.write(tmp_path / "after.pickle", sf.TrainingRun(steps=30, layers=4).snapshot())
    code = main(["diff", str(tmp_path / "before.pickle"), str(tmp_path / "after.pickle"),
                 "--json", str(tmp_path / "d.json")])
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads((tmp_path / "d.json").read_text())["diff"]
    assert data["a"]["kind"] == data["b"]["kind"] == "snapshot"
    peak = data["peak"][0]
    assert peak["key"] == "cuda:0" and peak["b"] < peak["a"]  # the leak is gone
    assert "peak reserved cuda:0" in out and "alive at the peak" in out
    gone = {f["cause"] for f in data["findings"] if f["status"] == "gone"}
    assert "cache_thrash" in gone
    assert "gone in " in out and "allocator cache emptied again and again" in out
    assert main(["diff", str(tmp_path / "before.pickle"), str(tmp_path / "after.pickle"),
                 "--quiet", "--fail-over", "0%"]) == 0  # the peak fell
    capture().save(tmp_path / "c.json")
    assert main(["diff", str(tmp_path / "c.json"), str(tmp_path / "after.pickle")]) == 2
    err = capsys.readouterr().err
    assert "is a torchmem capture and" in err and "a CUDA memory snapshot; expected two " \
        "inputs of the same kind" in err

