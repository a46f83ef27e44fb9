"""``torchmem report snapshot.pickle``: CUDA memory snapshots, read without running them.

The snapshots are built from PyTorch's documented format (``snapshot_factory``), pickled
by the real :mod:`pickle`, and every expected figure is computed here from the snapshot
object itself by a plain walk of its trace (:func:`oracle`), never written down. On a
CUDA machine, a real snapshot recorded by ``torch.cuda.memory._record_memory_history`` is
imported too. Hostile pickles are real ones: the same bytes make :func:`pickle.loads`
run a command (checked), and torchmem refuses them without creating the canary file.
"""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from torchmem.analyze.snapshot import analyze_snapshot
from torchmem.cli import main
from torchmem.model.snapshot_pickle import SnapshotError, read_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parent))
import snapshot_factory as sf  # noqa: E402

MiB = 1 << 20


def _write(tmp_path: Path, snap: dict[str, Any], name: str = "s.pickle",
           protocol: int = 4) -> Path:
    path = tmp_path / name
    sf.write(path, snap, protocol=protocol)
    return path


def oracle(snap: dict[str, Any], device: int = 0) -> dict[str, Any]:
    """The figures of one device, by a plain walk of the snapshot object."""
    trace = snap["device_traces"][device] if device < len(snap["device_traces"]) else []
    segs = [s for s in snap["segments"] if s["device"] == device]
    blocks = [b for s in segs for b in s["blocks"]]
    final = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    series, cur = [0], 0
    for e in trace:
        cur += e["size"] if e["action"] == "alloc" else \
            -e["size"] if e["action"] == "free_completed" else 0
        series.append(cur)
    offset = final - cur
    high = max(series)
    at = series.index(high)  # entries read when the peak was first reached
    alive: dict[int, int] = {}
    freed_unknown_after = []
    seen = set()
    for i, e in enumerate(trace, 1):
        if e["action"] == "alloc":
            seen.add(e["addr"])
            if i <= at:
                alive[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            if e["addr"] in seen or e["addr"] in alive:
                if i <= at:
                    alive.pop(e["addr"], None)
            elif i > at:
                freed_unknown_after.append(e["size"])
            seen.discard(e["addr"])
    allocated_in_trace = {e["addr"] for e in trace if e["action"] == "alloc"}
    never = [b["requested_size"] for b in blocks if b["state"] == "active_allocated"
             and b["address"] not in allocated_in_trace]
    split = 0
    for s in segs:
        states = {b["state"] for b in s["blocks"]}
        if "inactive" in states and len(states) > 1:
            split += sum(b["size"] for b in s["blocks"] if b["state"] == "inactive")
    return {"peak": offset + high, "peak_entry": at, "start": offset, "end": final,
            "reserved": sum(s["total_size"] for s in segs), "entries": len(trace),
            "live_count": len(alive) + len(freed_unknown_after) + len(never),
            "live_bytes": sum(alive.values()) + sum(freed_unknown_after) + sum(never),
            "inactive_split": split, "segments": len(segs), "blocks": len(blocks)}


def _check(report_device: Any, want: dict[str, Any]) -> None:
    d = report_device
    assert d.peak_allocated == want["peak"]
    assert d.peak_entry == want["peak_entry"]
    assert d.allocated_start == want["start"]
    assert d.allocated_end == want["end"]
    assert d.reserved_end == want["reserved"]
    assert d.entries == want["entries"]
    assert (d.segments, d.blocks) == (want["segments"], want["blocks"])
    assert d.live_at_peak == want["live_count"]
    assert want["live_bytes"] == want["peak"] and d.unattributed == 0
    assert d.fragmentation is not None and d.fragmentation.inactive_split == want["inactive_split"]
    assert max(d.timeline["allocated"]) == d.peak_allocated


def _comparable(report: Any) -> dict[str, Any]:
    data = report.to_dict()
    for key in ("source", "file_bytes", "seconds"):
        data.pop(key)
    return data


# -- the format ------------------------------------------------------------------------------

def test_the_streamed_writer_writes_what_pickle_writes(tmp_path):
    """The benchmark's streamed snapshots are byte for byte what pickle.dumps writes."""
    for kw in (dict(steps=4), dict(steps=30, leak_every=3), dict(steps=25, empty_cache=True)):
        want = pickle.dumps(sf.TrainingRun(**kw).snapshot(), protocol=4)
        path = tmp_path / "streamed.pickle"
        entries = sf.write_streamed(path, sf.TrainingRun(**kw))
        assert path.read_bytes() == want
        assert entries == len(pickle.loads(want)["device_traces"][0])


@pytest.mark.parametrize("kw", [dict(steps=12), dict(steps=40, leak_every=2),
                                dict(steps=15, empty_cache=True, cpp=False)])
def test_figures_match_a_plain_walk_of_the_snapshot(kw, tmp_path):
    snap = sf.TrainingRun(**kw).snapshot()
    report = analyze_snapshot(_write(tmp_path, snap))
    assert [d.device for d in report.devices] == ["cuda:0"]
    _check(report.devices[0], oracle(snap))
    top = report.devices[0].top_at_peak
    assert sum(s.count for s in top) <= report.devices[0].live_at_peak
    assert all(s.user_frames and s.user_frames[-1].filename == "train.py" for s in top)


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 5])
def test_every_pickle_protocol_gives_the_same_report(protocol, tmp_path):
    snap = sf.TrainingRun(steps=10, leak_every=3).snapshot()
    want = _comparable(analyze_snapshot(_write(tmp_path, snap, "p4.pickle", 4)))
    got = _comparable(analyze_snapshot(_write(tmp_path, snap, f"p{protocol}.pickle", protocol)))
    assert got == want


def test_entries_reach_the_sink_as_pickle_loads_them(tmp_path):
    """The streaming reader, small chunks included, against the real unpickler (on a file
    this test wrote itself, so loading it is safe)."""
    snap = sf.TrainingRun(steps=30, leak_every=4).snapshot()
    path = _write(tmp_path, snap)
    trusted = pickle.loads(path.read_bytes())["device_traces"][0]

    class Sink:
        def __init__(self) -> None:
            self.got: list[tuple[Any, ...]] = []

        def add(self, action, addr, size, stream, time_us, frames):
            self.got.append((action, addr, size, stream, time_us,
                             tuple(tuple(f) for f in frames or ())))

    for chunk in (997, 1 << 16, 8 << 20):
        data = read_snapshot(path, Sink, chunk=chunk)
        want = [(e["action"], e["addr"], e["size"], e["stream"], e["time_us"],
                 tuple((f["filename"], f["line"], f["name"]) for f in e["frames"]))
                for e in trusted]
        assert data.sinks[0].got == want
        assert data.top["device_traces"] == [[]]
        assert len(data.top["segments"]) == len(snap["segments"])


def test_a_trace_that_starts_late_is_made_absolute_by_the_segments(tmp_path):
    """The max_entries ring buffer keeps the last entries only: the allocations made before
    show up as frees of unknown addresses and as blocks the trace never allocated."""
    snap = sf.TrainingRun(steps=20, leak_every=2).snapshot()
    snap["device_traces"][0] = snap["device_traces"][0][250:]
    report = analyze_snapshot(_write(tmp_path, snap))
    d = report.devices[0]
    want = oracle(snap)
    assert want["start"] > 0
    _check(d, want)
    assert any(s.before_trace for s in d.top_at_peak)
    assert any("begins after some allocations" in n for n in report.notes)


def test_segments_only_when_no_history_was_recorded(tmp_path):
    snap = sf.TrainingRun(steps=5, leak_every=1).snapshot()
    snap["device_traces"] = [[]]
    d = analyze_snapshot(_write(tmp_path, snap)).devices[0]
    want = oracle(snap)
    assert d.entries == 0 and d.peak_allocated == want["end"] == d.allocated_end
    assert d.live_at_peak == want["live_count"] and all(s.before_trace for s in d.top_at_peak)
    assert d.growth is None and d.timeline["t"] == []


def test_legacy_blocks_with_history_and_entries_without_time(tmp_path):
    """PyTorch 2.0 wrote a block's stack under ``history`` and no ``time_us``."""
    frames = sf.Frames()
    stack = frames.stack(("train.py", 7, "main"))
    block = {"size": 4 * MiB, "state": "active_allocated",
             "history": [{"addr": 0x1000, "real_size": 3 * MiB, "frames": stack}]}
    free = {"size": 16 * MiB, "state": "inactive", "history": []}
    seg = {"device": 0, "address": 0x1000, "total_size": 20 * MiB, "allocated_size": 4 * MiB,
           "active_size": 4 * MiB, "stream": 0, "segment_type": "large", "blocks": [block, free]}
    trace = [{"action": "alloc", "addr": 0x1000 + i * MiB, "size": MiB, "stream": 0,
              "frames": stack} for i in range(3)]
    snap = {"segments": [seg], "device_traces": [trace]}
    d = analyze_snapshot(_write(tmp_path, snap, protocol=2)).devices[0]
    assert d.timeline_unit == "entry" and d.duration_s is None
    assert (d.allocated_end, d.peak_allocated) == (3 * MiB, 3 * MiB)
    assert d.top_at_peak[0].user_frames[0].line == 7
    assert d.fragmentation.inactive_split == 16 * MiB


def test_two_devices(tmp_path):
    run = sf.TrainingRun(steps=6)
    snap = run.snapshot()
    other = copy.deepcopy(snap["segments"])
    for seg in other:
        seg["device"] = 1
    snap["segments"] += other
    snap["device_traces"].append(copy.deepcopy(snap["device_traces"][0])[-40:])
    report = analyze_snapshot(_write(tmp_path, snap))
    assert [d.device for d in report.devices] == ["cuda:0", "cuda:1"]
    for i, d in enumerate(report.devices):
        want = oracle(snap, i)
        assert (d.entries, d.reserved_end, d.peak_allocated) == \
            (want["entries"], want["reserved"], want["peak"])


# -- findings --------------------------------------------------------------------------------

def test_empty_cache_every_step_is_cache_thrash_with_its_line(tmp_path):
    steps = 8
    report = analyze_snapshot(_write(tmp_path, sf.TrainingRun(steps=steps,
                                                              empty_cache=True).snapshot()))
    (f,) = [f for f in report.findings if f.cause == "cache_thrash"]
    d = report.devices[0]
    assert d.empty_cache_runs == steps == f.data["empty_cache_runs"]
    assert (f.culprit.file, f.culprit.line) == ("train.py", 50)
    assert 0 < f.bytes == d.bytes_rerequested <= d.bytes_returned
    calm = analyze_snapshot(_write(tmp_path, sf.TrainingRun(steps=steps).snapshot(), "c.pickle"))
    assert not calm.findings and calm.devices[0].flush_runs == 0


def _fragmented(split_free: int, frames: sf.Frames) -> dict[str, Any]:
    """Segments of 20 MiB, each with a 4 MiB tensor and a free piece beside it."""
    stack = frames.stack(("model.py", 3, "forward"), ("train.py", 9, "main"))
    segs, trace, t = [], [], 1_700_000_000_000_000
    for i in range(split_free // (16 * MiB)):
        base = 0x7F0000000000 + i * 32 * MiB
        blocks = [sf.block(base, 4 * MiB, 4 * MiB - 100, "active_allocated", stack),
                  sf.block(base + 4 * MiB, 16 * MiB, 0, "inactive", [])]
        segs.append(sf.segment(base, blocks, []))
        trace.append(sf.entry("segment_alloc", base, 20 * MiB, t + 2 * i, stack))
        trace.append(sf.entry("alloc", base, 4 * MiB - 100, t + 2 * i + 1, stack))
    return sf.snapshot(segs, [trace])


def test_split_free_blocks_are_fragmentation(tmp_path):
    snap = _fragmented(160 * MiB, sf.Frames())
    report = analyze_snapshot(_write(tmp_path, snap))
    d = report.devices[0]
    assert d.fragmentation.verdict == "fragmented"
    assert d.fragmentation.inactive_split == oracle(snap)["inactive_split"] == 160 * MiB
    (f,) = report.findings
    assert f.cause == "fragmentation" and f.bytes == 160 * MiB
    assert d.largest_free_block == 16 * MiB
    small = analyze_snapshot(_write(tmp_path, _fragmented(32 * MiB, sf.Frames()), "s.pickle"))
    assert small.devices[0].fragmentation.verdict == "ok" and not small.findings


def test_out_of_memory_entries(tmp_path):
    snap = _fragmented(96 * MiB, sf.Frames())
    stack = sf.Frames().stack(("train.py", 12, "step"))
    snap["device_traces"][0].append(sf.entry("oom", 5 * MiB, 64 * MiB, 1_800_000_000_000_000,
                                             stack))
    d = analyze_snapshot(_write(tmp_path, snap)).devices[0]
    assert d.ooms == 1 and d.fragmentation.verdict == "pressure"
    (oom,) = d.oom_events
    assert (oom.requested, oom.device_free, oom.user_frames[0].line) == (64 * MiB, 5 * MiB, 12)


def test_growth_across_the_trace(tmp_path):
    leak = analyze_snapshot(_write(tmp_path, sf.TrainingRun(steps=150, leak_every=2).snapshot()))
    assert leak.devices[0].growth.verdict == "growing"
    assert leak.devices[0].top_at_peak[0].user_frames[0].line == 20  # the kept activation
    flat = analyze_snapshot(_write(tmp_path, sf.TrainingRun(steps=150).snapshot(), "f.pickle"))
    assert flat.devices[0].growth.verdict == "flat"


# -- the command line ------------------------------------------------------------------------

def test_cli_text_html_json_and_back(tmp_path, capsys):
    path = _write(tmp_path, sf.TrainingRun(steps=40, leak_every=2).snapshot())
    assert main(["report", str(path), "--width", "120"]) == 0
    out = capsys.readouterr().out
    assert "CUDA memory snapshot" in out and "model.py:20 forward" in out
    assert "growing: the lowest allocated level rises" in out
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["report", str(path), "--html", str(html), "--json", str(js)]) == 0
    err = capsys.readouterr().err
    assert "HTML report written" in err and "snapshot report written" in err
    page = html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "<svg" in page
    assert json.loads(js.read_text())["kind"] == "torchmem cuda snapshot report"
    assert main(["report", str(js), "--width", "120"]) == 0
    assert capsys.readouterr().out == out


def test_snapshot_report_never_imports_torch(tmp_path):
    path = _write(tmp_path, sf.TrainingRun(steps=5).snapshot())
    code = ("import sys; from torchmem.cli import main; "
            f"rc = main(['report', {str(path)!r}, '--html', {str(tmp_path / 'r.html')!r}]); "
            "assert rc == 0, rc; assert 'torch' not in sys.modules, 'torch imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_strings_from_the_file_are_escaped(tmp_path, capsys):
    evil = "\x1b[2J<script>alert(1)</script>\u202e.py"
    frames = sf.Frames()
    stack = frames.stack((evil, 1, "\x1b]52;c;eA==\x07"))
    snap = sf.snapshot([], [[sf.entry("alloc", 0x10, MiB, 1, stack)]])
    path = _write(tmp_path, snap)
    assert main(["report", str(path), "--html", str(tmp_path / "r.html"), "--text"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[2J" in out
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;" in page


# -- hostile and broken files ----------------------------------------------------------------

class _Command:
    """An object whose unpickling runs a shell command (``__reduce__``)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _hostile(canary: Path) -> dict[str, bytes]:
    touch = f"touch {canary}"
    snap = sf.TrainingRun(steps=2).snapshot()
    cases = {}
    for protocol in range(6):  # REDUCE of GLOBAL (0-3) or STACK_GLOBAL (4, 5)
        evil = copy.deepcopy(snap)
        evil["device_traces"][0][3]["frames"] = [_Command(touch)]
        cases[f"reduce_p{protocol}"] = pickle.dumps(evil, protocol=protocol)
        cases[f"top_level_p{protocol}"] = pickle.dumps(_Command(touch), protocol=protocol)
    cases["inst"] = f"(V{touch}\nios\nsystem\n.".encode()
    cases["obj"] = b"(]Vx\no."
    cases["newobj"] = b"\x80\x02])\x81."
    cases["newobj_ex"] = b"\x80\x04]})\x92."
    cases["build"] = b"\x80\x02}}b."
    cases["reduce_only"] = b"\x80\x02])R."
    cases["ext1"] = b"\x80\x02\x82\x01."
    cases["persid"] = b"Pfoo\n."
    cases["binpersid"] = b"\x80\x02NQ."
    cases["a_function"] = pickle.dumps(os.system)
    cases["a_class"] = pickle.dumps(dict.__class__)
    cases["bytes"] = pickle.dumps({"segments": [b"x"], "device_traces": []}, protocol=4)
    cases["a_set"] = pickle.dumps({"segments": [], "device_traces": [], "x": {1}}, protocol=4)
    cases["buffer"] = b"\x80\x05\x97."
    return cases


def _broken() -> dict[str, bytes]:
    good = pickle.dumps(sf.TrainingRun(steps=3).snapshot(), protocol=4)
    return {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "text": b"hello, this is not a pickle\n",
        "gzip": b"\x1f\x8b\x08\x00" + b"\x00" * 20,
        "huge_string": b"\x80\x04X\xf0\xff\xff\xff" + b"a" * 10,
        "huge_string8": b"\x80\x04\x8d" + (1 << 60).to_bytes(8, "little") + b"abc",
        "huge_long": b"\x80\x04\x8b\xff\xff\xff\x7f" + b"\x01" * 10,
        "memo_far_away": b"\x80\x04]r\xff\xff\xff\xff0j\x00\x00\x00\x00.",
        "deep": b"\x80\x04" + b"(" * 100_000,
        "wide": b"\x80\x04(" + b"N" * 200_000,
        "protocol_9": b"\x80\x09}.",
        "a_list": pickle.dumps([1, 2, 3], protocol=4),
        "capture_json_pickled": pickle.dumps({"schema_version": 1, "tool": "torchmem doctor",
                                              "steps": []}, protocol=4),
        "traces_not_lists": pickle.dumps({"segments": [], "device_traces": [1]}, protocol=4),
        "entry_size_text": pickle.dumps({"segments": [], "device_traces": [[
            {"action": "alloc", "addr": 1, "size": "big"}]]}, protocol=4),
        "entry_size_beyond_64_bits": pickle.dumps({"segments": [], "device_traces": [[
            {"action": "alloc", "addr": 1, "size": 1 << 70}]]}, protocol=4),
    }


def test_the_hostile_pickles_really_run_code(tmp_path):
    """The test's hostile files are real: pickle.loads runs them (in a child process)."""
    canary = tmp_path / "canary"
    for name in ("reduce_p2", "reduce_p4", "top_level_p0", "inst"):
        data = _hostile(canary)[name]
        proc = subprocess.run([sys.executable, "-c", "import pickle, sys; "
                               "pickle.loads(sys.stdin.buffer.read())"], input=data,
                              capture_output=True, timeout=60)
        assert canary.exists(), (name, proc.stderr)
        canary.unlink()


def test_hostile_pickles_are_refused_and_never_run(tmp_path, capsys):
    canary = tmp_path / "canary"
    for name, data in _hostile(canary).items():
        path = tmp_path / f"{name}.pickle"
        path.write_bytes(data)
        assert main(["report", str(path)]) == 2, name
        out, err = capsys.readouterr()
        first = err.splitlines()[0]
        assert first.startswith(f"torchmem report: error: {path}: refused: "), (name, err)
        assert "Traceback" not in err and out == ""
        assert not canary.exists(), name
    with pytest.raises(SnapshotError, match="GLOBAL|STACK_GLOBAL"):
        analyze_snapshot(tmp_path / "reduce_p4.pickle")


@pytest.mark.parametrize("case", sorted(_broken()))
def test_broken_files_are_one_line_exit_2(case, tmp_path, capsys):
    path = tmp_path / f"{case}.pickle"
    path.write_bytes(_broken()[case])
    assert main(["report", str(path)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and lines[0].startswith(f"torchmem report: error: {path}: ")
    assert len(lines) <= 2 and "Traceback" not in err
    expected = {"empty": "empty", "truncated": "truncated", "text": "not a pickle",
                "gzip": "gzip", "huge_string": "string of", "huge_long": "integer of",
                "deep": "nested more than", "wide": "values between two marks",
                "protocol_9": "protocol 9", "a_list": "not a CUDA memory snapshot",
                "capture_json_pickled": "a torchmem capture",
                "memo_far_away": "never stored", "entry_size_text": "not an integer",
                "entry_size_beyond_64_bits": "out of the range"}
    assert expected.get(case, "") in lines[0]


def _fuzzed(seed: int, count: int) -> list[bytes]:
    """Damaged snapshots: bytes flipped, cut or inserted, and values of the wrong type."""
    rnd = random.Random(seed)
    snap = sf.TrainingRun(steps=3, empty_cache=True, leak_every=1).snapshot()
    good = [pickle.dumps(snap, protocol=p) for p in (0, 2, 4)]
    values = [None, "", "\x1b[2J", -1, 1 << 70, 1.5, float("nan"), [], {}, (1, 2), True,
              {"filename": 3, "line": "x", "name": None}]
    out = []
    for _ in range(count):
        data = bytearray(rnd.choice(good))
        k = rnd.randrange(len(data))
        data[k:k + rnd.randint(0, 3)] = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 3)))
        out.append(bytes(data))
        bent = copy.deepcopy(snap)
        holder = rnd.choice([bent, bent["segments"][0], bent["segments"][0]["blocks"][0],
                             *bent["device_traces"][0][:20]])
        holder[rnd.choice(list(holder))] = rnd.choice(values)
        out.append(pickle.dumps(bent, protocol=4))
    return out


def test_damaged_snapshots_give_a_report_or_a_refusal(tmp_path):
    """Never a traceback: a report (rendered, written as JSON and read back) or a
    SnapshotError."""
    from torchmem.cli._snapshot_report import load_snapshot_report, snapshot_report_json
    from torchmem.report.snapshot_html import render_snapshot_html
    from torchmem.report.snapshot_text import render_snapshot

    path, again = tmp_path / "f.pickle", tmp_path / "f.json"
    refused = 0
    for data in _fuzzed(seed=3, count=60):
        path.write_bytes(data)
        try:
            report = analyze_snapshot(path)
        except SnapshotError:
            refused += 1
            continue
        render_snapshot(report, io.StringIO(), width=100)
        assert render_snapshot_html(report).startswith("<!DOCTYPE html>")
        again.write_text(snapshot_report_json(report))
        assert load_snapshot_report(str(again)) == report
    assert 0 < refused < 120


def test_a_capture_json_still_goes_to_the_capture_reader(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text('{"tool": "x"}')
    assert main(["report", str(path)]) == 2
    assert "not a torchmem capture" in capsys.readouterr().err


def test_one_snapshot_at_a_time(tmp_path, capsys):
    path = _write(tmp_path, sf.TrainingRun(steps=2).snapshot())
    assert main(["report", str(path), str(path)]) == 2
    assert "expected one snapshot per command, got 2 files" in capsys.readouterr().err


def test_missing_snapshot(tmp_path, capsys):
    path = tmp_path / "nope.pickle"
    assert main(["report", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"torchmem report: error: {path}: not found")


def test_the_demo_snapshot_of_the_docs_is_what_the_factory_writes(tmp_path):
    """docs/snapshot.md quotes the report of docs/snapshot-demo.pickle; it was written by
    ``python tests/report/snapshot_factory.py docs/snapshot-demo.pickle``."""
    demo = Path(__file__).resolve().parents[2] / "docs" / "snapshot-demo.pickle"
    sf.main([str(tmp_path / "again.pickle")])
    assert (tmp_path / "again.pickle").read_bytes() == demo.read_bytes()


# -- a real snapshot -------------------------------------------------------------------------

@pytest.mark.cuda
def test_a_real_snapshot_recorded_on_this_gpu(tmp_path):
    import torch

    path = tmp_path / "real.pickle"
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        kept = [torch.empty(MiB, device="cuda") for _ in range(8)]  # 4 MiB each
        del kept[::2]
        peak = torch.cuda.max_memory_allocated()
        torch.cuda.memory._dump_snapshot(str(path))
        allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    report = analyze_snapshot(path)
    d = next(d for d in report.devices if d.device == f"cuda:{torch.cuda.current_device()}")
    assert d.reserved_end == reserved
    assert d.fragmentation.allocated == allocated
    assert d.entries > 0 and 16 * MiB <= d.peak_allocated <= peak
    here = Path(__file__).name
    assert any(f.filename.endswith(here) for s in d.top_at_peak for f in s.user_frames)
    with open(path, "rb") as fh:  # a file this test recorded itself: safe to unpickle
        trusted = pickle.load(fh)
    assert d.entries == len(trusted["device_traces"][torch.cuda.current_device()])
    del kept
