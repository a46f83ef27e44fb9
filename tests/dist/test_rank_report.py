"""One report for every rank: the captures of a distributed run merged, by hand-built
captures, through ``torchmem report a.json b.json``, and at the end of a real
``torchrun ... -m torchmem doctor`` (gloo ranks on the CPU)."""

from __future__ import annotations

import json
import os
import socket
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from torchmem.analyze.ranks import merge_ranks
from torchmem.cli import main as cli_main
from torchmem.cli._rank_report import rank_report_json
from torchmem.errors import CaptureError
from torchmem.model.capture import Capture, Culprit, Finding, Growth, StepRecord
from torchmem.model.rank_report import MergedRankReport
from torchmem.report.ranks_html import render_rank_html
from torchmem.report.ranks_text import rank_report_lines

MiB = 1 << 20


def _finding(nbytes: int, per_step: float = 0.0, name: str = "losses", line: int = 19,
             cause: str = "retained_graph") -> Finding:
    return Finding(cause=cause, title="retained autograd graph", bytes=nbytes,
                   bytes_per_step=per_step,
                   culprit=Culprit(name, "local", f"/node{line}/train.py", line,
                                   "losses.append(loss)"),
                   fix="`losses.append(loss.item())`")


def _capture(rank: int, world: int, *, peak: int, growth: float = 0.0,
             findings: tuple[Finding, ...] = (), roles: dict[str, int] | None = None,
             argv: tuple[str, ...] = ("train.py",), run_id: str = "job-1",
             started_at: str = "2025-01-01T00:00:00+00:00", duration: float = 30.0,
             tool: str = "torchmem doctor", device: str = "cpu") -> Capture:
    steps = tuple(StepRecord(step=i, time=float(i), used={device: 100 * MiB + int(growth) * i})
                  for i in range(1, 11))
    verdict = "growing" if growth else "flat"
    return Capture(
        tool=tool, version="0", argv=argv, started_at=started_at, duration_s=duration,
        exit_code=0, outcome="ok", step_source="optimizer", devices=(device,), steps=steps,
        peak={device: peak},
        growth=(Growth(device, verdict, bytes_per_step=growth, r2=1.0, first_step=2,
                       last_step=10),),
        findings=findings, bytes_by_role=roles or {},
        environment={"rank": str(rank), "world_size": str(world), "run_id": run_id})


def _two_ranks() -> list[tuple[str, Capture]]:
    return [
        ("run.rank0.json", _capture(0, 2, peak=110 * MiB,
                                    roles={"parameter": 4 * MiB, "activation": 1 * MiB})),
        ("run.rank1.json", _capture(1, 2, peak=140 * MiB, growth=0.5 * MiB,
                                    findings=(_finding(22 * MiB, 0.5 * MiB),),
                                    roles={"parameter": 4 * MiB, "activation": 23 * MiB})),
    ]


def test_a_leak_on_one_rank_is_named_with_its_rank_and_the_heavier_rank() -> None:
    report = merge_ranks(_two_ranks())
    assert [r.rank for r in report.ranks] == [0, 1] and report.missing == ()
    assert report.heaviest is not None and report.heaviest.rank == 1
    assert report.peak_spread == 30 * MiB and report.imbalanced
    assert report.growing == (1,)
    top = report.roles[0]
    assert (top.role, top.bytes, top.heaviest, top.spread) == (
        "activation", (1 * MiB, 23 * MiB), 1, 22 * MiB)
    assert report.roles[1].spread == 0  # parameters: the same on both ranks
    [finding] = report.findings
    assert finding.ranks == (1,) and finding.differs and finding.why == "on rank 1 only"
    text = "\n".join(rank_report_lines(report))
    assert "imbalanced: rank 1 peaks 30.0 MiB above rank 0" in text
    assert "memory grows on rank 1 only (rank 1 +512.0 KiB/step); not on rank 0" in text
    assert "`losses` (train.py:19): on rank 1 only" in text
    assert "activation  rank 1: 23.0 MiB" in text
    # a plain-data report: the JSON round trip keeps every figure
    assert MergedRankReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report


def test_findings_are_matched_across_ranks_by_cause_and_culprit() -> None:
    same = _finding(8 * MiB, 0.25 * MiB)
    captures = [(f"r{r}", _capture(r, 4, peak=100 * MiB, findings=f))
                for r, f in enumerate([
                    (same, _finding(MiB, name="cache", line=40)),
                    (same, _finding(MiB, name="cache", line=40)),
                    (same,),
                    (_finding(30 * MiB, 0.25 * MiB), _finding(MiB, name="cache", line=40)),
                ])]
    report = merge_ranks(captures)
    by_name = {f.culprit.name: f for f in report.findings if f.culprit}
    losses, cache = by_name["losses"], by_name["cache"]
    # on every rank, but rank 3 holds far more: differs, and says which rank
    assert losses.everywhere and losses.differs and losses.ranks == (0, 1, 2, 3)
    assert "30.0 MiB on rank 3" in losses.why and "8.0 MiB on rank 0" in losses.why
    assert cache.ranks == (0, 1, 3) and cache.why == "on every rank but rank 2"
    assert not report.imbalanced and report.growing == ()
    balanced = merge_ranks([(f"r{r}", _capture(r, 2, peak=100 * MiB, findings=(same,)))
                            for r in range(2)])
    assert not balanced.findings[0].differs and not balanced.imbalanced
    assert ("balanced: every rank peaks at 100.0 MiB (C heap in use on cpu)"
            in rank_report_lines(balanced))
    close = merge_ranks([(f"r{r}", _capture(r, 2, peak=(100 + r) * MiB)) for r in range(2)])
    assert ("balanced: rank 1 peaks 1.0 MiB above rank 0 (101.0 MiB vs 100.0 MiB of C heap in "
            "use on cpu, 1% of the heaviest, within the 10% tolerance)"
            in rank_report_lines(close))
    assert balanced.findings[0].why == "the same on every rank"
    assert "findings the same on every rank" in "\n".join(rank_report_lines(balanced))


def test_missing_ranks_are_named() -> None:
    report = merge_ranks([("a", _capture(0, 4, peak=MiB)), ("c", _capture(2, 4, peak=MiB))])
    assert report.missing == (1, 3)
    assert "missing: ranks 1, 3 of 4 (no capture)" in rank_report_lines(report)


@pytest.mark.parametrize("second, message", [
    (_capture(1, 4, peak=MiB), "different runs: a.json has world size 2, b.json has world size 4"),
    (_capture(0, 2, peak=MiB), "a.json and b.json are both rank 0"),
    (_capture(1, 2, peak=MiB, run_id="job-2"), "have torchrun run id 'job-1' and 'job-2'"),
    (_capture(1, 2, peak=MiB, argv=("other.py",)), "ran 'train.py' and 'other.py'"),
    (_capture(1, 2, peak=MiB, tool="torchmem run"), "were recorded by"),
    (_capture(1, 2, peak=MiB, started_at="2025-01-02T00:00:00+00:00"),
     "b.json started 86370 s after a.json had ended"),
])
def test_captures_of_different_runs_are_refused(second: Capture, message: str) -> None:
    with pytest.raises(CaptureError) as info:
        merge_ranks([("a.json", _capture(0, 2, peak=MiB)), ("b.json", second)])
    assert message in info.value.message and "\n" not in info.value.message


def test_a_capture_without_a_rank_is_refused() -> None:
    plain = Capture(tool="torchmem doctor", version="0", argv=("t.py",), started_at="",
                    duration_s=1.0, exit_code=0, outcome="ok")
    with pytest.raises(CaptureError, match="t.json has no rank; expected a capture recorded "
                                           "under torchrun"):
        merge_ranks([("t.json", plain), ("b.json", _capture(1, 2, peak=MiB))])


def test_html_page_is_self_contained_and_escapes_capture_strings() -> None:
    evil = Finding(cause="retained_graph", title="<script>alert(1)</script>", bytes=MiB,
                   culprit=Culprit("x\u202eevil</code>", file="t.py", line=3,
                                   code="<img src=http://example.com/x>"))
    captures = _two_ranks()
    captures[1] = ("run.rank1.json", _capture(1, 2, peak=140 * MiB, findings=(evil,),
                                              roles={"activation": MiB}))
    page = render_rank_html(merge_ranks(captures))
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\u202e" not in page and "\\u202e" in page  # bidi override shown, not applied
    assert "<img" not in page and 'src="http' not in page and "<link" not in page
    assert "rank 1 only" in page and "<svg" in page  # per-rank chart, inline
    text = "\n".join(rank_report_lines(merge_ranks(captures)))
    assert "\u202e" not in text and "x\\u202eevil" in text


# --- the CLI: torchmem report run.rank0.json run.rank1.json ... ----------------------------


def _save(tmp_path: Path, captures: list[tuple[str, Capture]]) -> list[str]:
    paths = []
    for name, capture in captures:
        capture.save(tmp_path / name)
        paths.append(str(tmp_path / name))
    return paths


def test_cli_merges_several_captures(tmp_path: Path, capsys: Any) -> None:
    paths = _save(tmp_path, _two_ranks())
    html, merged = tmp_path / "all.html", tmp_path / "all.json"
    assert cli_main(["report", *paths, "--text", "--html", str(html), "--json", str(merged)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("torchmem doctor: 2 ranks of train.py (world size 2)")
    assert "on rank 1 only" in out.out and "imbalanced: rank 1" in out.out
    assert "HTML report written to" in out.err and "merged report written to" in out.err
    assert "<svg" in html.read_text() and "on rank 1 only" in html.read_text()
    # record once, render many: the merged JSON renders the same text again
    assert cli_main(["report", str(merged)]) == 0
    again = capsys.readouterr().out
    assert again == out.out
    # one capture alone is the single-run report, as before
    assert cli_main(["report", paths[0]]) == 0
    assert "torchmem doctor: train.py" in capsys.readouterr().out


def test_cli_refuses_mixed_runs_and_bad_files_in_one_line(tmp_path: Path, capsys: Any) -> None:
    a, b = _save(tmp_path, [("a.json", _capture(0, 2, peak=MiB)),
                            ("b.json", _capture(1, 4, peak=MiB))])
    assert cli_main(["report", a, b]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("torchmem report: error: captures are from different runs")
    assert len(err) == 1
    assert cli_main(["report", a, str(tmp_path / "nope.json")]) == 2
    assert "capture not found" in capsys.readouterr().err
    broken = tmp_path / "merged.json"
    broken.write_text('{"kind": "torchmem rank report", "version": 1, "ranks": 3}')
    assert cli_main(["report", str(broken)]) == 2
    assert "is not a valid torchmem rank report" in capsys.readouterr().err
    # a merged report whose lists do not add up is refused, not rendered with a traceback
    data = json.loads(rank_report_json(merge_ranks(_two_ranks())))
    data["roles"][0]["bytes"] = [1]
    broken.write_text(json.dumps(data))
    assert cli_main(["report", str(broken), "--html", str(tmp_path / "x.html")]) == 2
    assert "roles[0].bytes: expected one value per rank (2), got 1" in capsys.readouterr().err
    data["version"] = 99
    broken.write_text(json.dumps(data))
    assert cli_main(["report", str(broken)]) == 2
    assert "rank report version 99; this torchmem reads 1..1" in capsys.readouterr().err
    assert cli_main(["report", a, b, "--html", a]) == 2  # never overwrites an input
    assert "would overwrite the capture" in capsys.readouterr().err


# --- real ranks: torchrun (gloo, CPU) running the doctor ---------------------------------

#: a DDP script (gloo) whose ``--leaky-ranks`` keep every validation graph (~0.8 MiB/step)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_leaky_train.py"
#: the line that keeps the graphs (the culprit's line in every report)
LEAK_LINE = next(i for i, line in enumerate(EXAMPLE.read_text().splitlines(), 1)
                 if "val_losses.append" in line)
SCRIPT = EXAMPLE.name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_script(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / SCRIPT)


def _torchrun(tmp_path: Path, nproc: int, *doctor_args: str,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={nproc}", f"--master_port={_free_port()}",
               "-m", "torchmem", "doctor", *doctor_args]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ if env is None else env, OMP_NUM_THREADS="1"))


@pytest.mark.slow
def test_torchrun_two_ranks_rank0_prints_one_report_for_every_rank(tmp_path: Path) -> None:
    _write_script(tmp_path)
    done = _torchrun(tmp_path, 2, "--json", "run.json", "--html", "page.html", SCRIPT,
                     "--steps", "20", "--leaky-ranks", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    # the script's stdout is untouched: rank 0's line, nothing of torchmem's
    assert "trained 20 steps on 2 ranks" in done.stdout and "torchmem" not in done.stdout
    err = done.stderr
    merged = err[err.index(f"torchmem doctor: 2 ranks of {SCRIPT} (world size 2)"):]
    assert "balanced: rank 1 peaks" in merged  # rank 1 is the heavier one (C heap peaks)
    assert f"`val_losses` ({SCRIPT}:{LEAK_LINE}): on rank 1 only" in merged
    assert "activation  rank 1:" in merged
    for name in ("run.rank0.json", "run.rank1.json", "page.rank0.html", "page.rank1.html",
                 "page.all-ranks.html"):
        assert (tmp_path / name).is_file(), name
    assert "on rank 1 only" in (tmp_path / "page.all-ranks.html").read_text()
    # the files say the same when merged later
    later = merge_ranks([(p.name, Capture.load(p)) for p in tmp_path.glob("run.rank*.json")])
    assert later.heaviest is not None and later.heaviest.rank == 1
    assert [f.ranks for f in later.findings] == [(1,)]
    # rank 1 keeps each validation graph: its growth per step dwarfs rank 0's heap noise
    assert later.rank(1).verdict == "growing"
    assert later.rank(1).bytes_per_step > 20 * max(later.rank(0).bytes_per_step, 1024)


#: a sitecustomize that makes numpy unimportable in every process that starts with it,
#: and has each rank write down, as it exits, that numpy was still missing
_NO_NUMPY = """
import atexit, os, sys
sys.modules["numpy"] = None  # as on a machine without numpy


def _note():
    if os.environ.get("RANK"):
        with open(f"numpy-rank{os.environ['RANK']}.txt", "w") as fh:
            fh.write("missing" if sys.modules.get("numpy") is None else "imported")


atexit.register(_note)
"""


@pytest.mark.slow
def test_torchrun_four_ranks_without_numpy(tmp_path: Path) -> None:
    _write_script(tmp_path)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(_NO_NUMPY)  # every rank runs without numpy
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(shim), *filter(None, [os.environ.get("PYTHONPATH")])]), PYTHONWARNINGS="ignore")
    done = _torchrun(tmp_path, 4, "--json", "run.json", SCRIPT, "--steps", "12",
                     "--leaky-ranks", "1,3", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trained 12 steps on 4 ranks" in done.stdout
    for rank in range(4):
        capture = Capture.load(tmp_path / f"run.rank{rank}.json")
        assert capture.environment["world_size"] == "4"
        assert (tmp_path / f"numpy-rank{rank}.txt").read_text() == "missing"
    merged = done.stderr[done.stderr.index(f"torchmem doctor: 4 ranks of {SCRIPT}"):]
    assert f"`val_losses` ({SCRIPT}:{LEAK_LINE}): on ranks 1, 3 only" in merged
    later = merge_ranks([(p.name, Capture.load(p)) for p in tmp_path.glob("run.rank*.json")])
    assert later.heaviest is not None and later.heaviest.rank in (1, 3)
    assert later.roles[0].role == "activation" and later.roles[0].heaviest in (1, 3)
    assert "missing" not in merged


_SOLO_SCRIPT = "import sys\nprint('alone')\nsys.exit(3)\n"


@pytest.mark.slow
def test_a_rank_that_never_reports_is_named_and_the_exit_code_stands(tmp_path: Path) -> None:
    (tmp_path / "solo.py").write_text(_SOLO_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHELASTIC")}
    env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="2")  # rank 1 never comes
    done = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--growth-only",
                           "--json", "run.json", "--rank-timeout", "0.5", "solo.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 3, done.stderr[-3000:]
    assert done.stdout == "alone\n"
    assert "torchmem doctor: 1 rank of solo.py (world size 2)" in done.stderr
    assert "missing: rank 1 of 2 (no capture)" in done.stderr
    assert "no capture from rank 1 within 0.5 s" in done.stderr


@pytest.mark.slow
def test_without_torchrun_rank0_reads_the_other_ranks_files(tmp_path: Path) -> None:
    """Ranks launched by hand (no torchrun agent store, the script destroys its group):
    rank 0 waits for the other rank's file next to its own."""
    _write_script(tmp_path)
    (tmp_path / "out").mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCHELASTIC")}
    port = str(_free_port())
    procs = []
    for rank in range(2):
        env = dict(base, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE="2", OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "torchmem", "doctor", "--json", "out/run-{rank}.json",
             SCRIPT, "--steps", "12"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=240))
            assert p.returncode == 0, outs[-1][1][-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    err0, err1 = outs[0][1], outs[1][1]
    assert f"torchmem doctor: 2 ranks of {SCRIPT}" not in err1  # only rank 0 merges
    merged = err0[err0.index(f"torchmem doctor: 2 ranks of {SCRIPT} (world size 2)"):]
    assert f"`val_losses` ({SCRIPT}:{LEAK_LINE}): on rank 1 only" in merged
    assert "missing" not in merged
