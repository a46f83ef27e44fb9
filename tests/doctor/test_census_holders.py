"""`torchmem doctor`: who holds the largest storages at the peak, at an out-of-memory
error and at the end, through the real CLI on real scripts (and the census schedule)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchmem.cli import main
from torchmem.doctor.census_holders import PeakCensus
from torchmem.model.capture import Capture

MiB = 1024 * 1024


# a trainer object keeps a 2 MiB tensor in a dict nested in an attribute
NESTED = """
import torch


class Stats:
    def __init__(self):
        self.hist = {"acts": {}}


class Trainer:
    def __init__(self):
        self.model = torch.nn.Linear(32, 32)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.stats = Stats()

    def fit(self, steps):
        for step in range(steps):
            loss = self.model(torch.randn(16, 32)).square().mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if step == 1:
                self.stats.hist["acts"]["big"] = torch.zeros(512, 1024)
"""

FUNCTION_STYLE = NESTED + """

def main():
    trainer = Trainer()
    trainer.fit(12)


main()
"""

MODULE_STYLE = NESTED + """

trainer = Trainer()
trainer.fit(12)
"""

BIG_LINE = 'self.stats.hist["acts"]["big"] = torch.zeros(512, 1024)'


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if line.strip() == text)


def _doctor(tmp_path: Path, source: str, *args: str) -> tuple[int, str, Capture, dict, str]:
    """Run ``torchmem doctor`` on ``source`` in a process of its own (a census sees every
    tensor of its process); return its exit code, the script, the capture, its JSON and
    the report."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--no-verify",
                           "--interval", "0", "--json", "cap.json", *args, str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          check=False)
    out = tmp_path / "cap.json"
    return (proc.returncode, str(script), Capture.load(out), json.loads(out.read_text()),
            proc.stderr)


def _held(moment, nbytes):
    return [s for s in moment.storages if s.nbytes == nbytes]


def test_a_tensor_in_a_nested_dict_attribute_is_named_with_its_line(tmp_path):
    code, script, capture, _, err = _doctor(tmp_path, FUNCTION_STYLE)
    assert code == 0
    moments = {m.when: m for m in capture.holders}
    peak = moments["peak"]
    (big,) = _held(peak, 2 * MiB)
    (holder,) = big.holders
    assert holder.path == "self.stats.hist['acts']['big']"
    assert (holder.file, holder.line) == (script, _line(FUNCTION_STYLE, BIG_LINE))
    assert big.role == "other" and big.shape == (512, 1024) and big.dtype == "float32"
    # the parameters are named as the user writes them, not by the graph that reaches them
    weight = next(s for s in peak.storages if s.name == "weight")
    assert weight.holders[0].path == "self.model.weight"
    # main() returned: nothing the script reaches is alive at the end, the peak stands in
    assert "end" not in moments and "stands for the end" in peak.note
    assert "who holds the largest storages at the peak" in err
    assert "self.stats.hist['acts']['big']" in err and "train.py:" in err
    assert "where each was made: unknown" in err  # no --lines: never a guessed line
    # one census: the capture's largest storages are the peak moment's
    assert [s.nbytes for s in capture.top_storages[:5]] == [s.nbytes for s in peak.storages[:5]]
    assert f"census at step {peak.step} of" in " ".join(capture.notes)


def test_objects_alive_after_the_script_get_an_end_moment(tmp_path):
    code, _, capture, _, _ = _doctor(tmp_path, MODULE_STYLE)
    assert code == 0
    end = next(m for m in capture.holders if m.when == "end")
    (big,) = _held(end, 2 * MiB)
    assert big.holders[0].path == "trainer.stats.hist['acts']['big']"
    assert end.step == 12


OOM = """
import torch


def train(cache):
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        loss = model(torch.randn(8, 64)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        cache.append(torch.ones(256, 1024))
    {fail}


train([])
"""

FAILURES = {
    "cpu allocator": ("huge = torch.empty(1 << 62, dtype=torch.uint8)", "DefaultCPUAllocator"),
    "OutOfMemoryError": (("raise torch.OutOfMemoryError('CUDA out of memory. Tried to "
                          "allocate 80.00 GiB')"), "OutOfMemoryError"),
}


@pytest.mark.parametrize("kind", FAILURES)
def test_an_out_of_memory_error_lists_who_holds_what_was_alive(tmp_path, kind):
    fail, text = FAILURES[kind]
    source = OOM.replace("{fail}", fail)
    code, _, capture, _, err = _doctor(tmp_path, source)
    assert code == 1 and capture.outcome == "oom" and text in (capture.error or "")
    oom = next(m for m in capture.holders if m.when == "oom")
    assert oom.step == 6
    kept = _held(oom, MiB)
    assert len(kept) >= 5  # the largest storages alive at the error: the cache's tensors
    line = _line(source, "cache.append(torch.ones(256, 1024))")
    for s in kept:
        assert s.holders and s.holders[0].path.startswith("cache[")
        assert s.holders[0].line == line
    assert "who holds the largest storages at the out-of-memory error (after step 6)" in err
    # the capture's largest storages come from the same census (the one at the error)
    assert [s.nbytes for s in capture.top_storages[:5]] == [s.nbytes for s in oom.storages[:5]]
    assert "census at step 6 of 6" in " ".join(capture.notes)


def test_doctor_lines_adds_the_allocating_line(tmp_path):
    source = MODULE_STYLE.replace("trainer = Trainer()\n",
                                  "trainer = Trainer()\nwarm = torch.full((1024, 768), 1.0)\n")
    code, script, capture, _, err = _doctor(tmp_path, source, "--lines")
    assert code == 0
    assert capture.lines and capture.line_profile is not None  # the lines engine ran
    end = next(m for m in capture.holders if m.when == "end")
    assert end.lines
    (warm,) = _held(end, 3 * MiB)
    assert warm.holders[0].path == "warm"
    assert warm.made_in == "setup"
    assert warm.stack[0].file == script
    assert warm.stack[0].line == _line(source, "warm = torch.full((1024, 768), 1.0)")
    assert "torchmem lines:" in err and "made in setup at train.py:" in err
    assert "where each was made: unknown" not in err


GRAPH = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(128, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 16))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
probe = model(torch.randn(512, 128))
for i in range(6):
    loss = model(torch.randn(8, 128)).sum()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_activations_saved_by_a_graph_name_the_variable_that_holds_the_graph(tmp_path):
    code, script, capture, _, _ = _doctor(tmp_path, GRAPH)
    assert code == 0
    end = next(m for m in capture.holders if m.when == "end")
    (saved,) = _held(end, 512 * 2048 * 4)  # the ReLU output, saved for backward
    assert saved.role == "activation" and saved.name == "saved by ReluBackward0"
    first = saved.holders[0]
    assert first.path == "probe.grad_fn" and first.kind == "graph"
    assert first.detail.startswith("saved for backward by ")
    line = _line(GRAPH, "probe = model(torch.randn(512, 128))")
    assert (first.file, first.line) == (script, line)


UNREACHED = """
import torch
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
w = torch.randn(1024, 1024, requires_grad=True)
(w * w).sum().backward(create_graph=True)
del w
for i in range(6):
    loss = model(torch.randn(8, 64)).sum()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_memory_no_path_reaches_is_reported_with_its_evidence(tmp_path):
    code, _, capture, _, err = _doctor(tmp_path, UNREACHED)
    assert code == 0
    peak = next(m for m in capture.holders if m.when == "peak")
    assert peak.complete
    lost = _held(peak, 4 * MiB)
    assert len(lost) == 2 and all(not s.holders and s.unreached for s in lost)
    grad = next(s for s in lost if s.role == "gradient")
    assert "no Python path from the script's variables reaches it" in grad.unreached
    assert "create_graph=True" in grad.unreached
    assert "not held by any path" in err


def test_holders_round_trip_through_json_and_old_captures_load(tmp_path, capsys):
    _, _, capture, data, _ = _doctor(tmp_path, OOM.replace("{fail}", FAILURES["cpu allocator"][0]))
    assert capture.holders and Capture.from_dict(capture.to_dict()) == capture
    (oom,) = [m for m in data["holders"] if m["when"] == "oom"]
    kept = [s for s in oom["storages"] if s["nbytes"] == MiB]
    assert kept and kept[0]["holders"][0]["path"].startswith("cache[")
    del data["holders"]  # a capture written before holders were recorded
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data), encoding="utf-8")
    assert Capture.load(old).holders == ()
    # `torchmem report` renders the section again from the file (on stdout)
    assert main(["report", str(tmp_path / "cap.json")]) == 0
    assert "who holds the largest storages at the out-of-memory error" in capsys.readouterr().out


def test_html_report_has_the_section(tmp_path):
    assert _doctor(tmp_path, MODULE_STYLE, "--html", "r.html")[0] == 0
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Who holds the largest storages" in html
    assert "trainer.stats.hist[&#39;acts&#39;][&#39;big&#39;]" in html


def _readings(census: PeakCensus, values: list[int]) -> list[int]:
    """Feed step readings to the schedule (time budget 0: only the doubling steps may
    exceed it); return the steps where a census was due (and pretend it was taken)."""
    taken = []
    for step, value in enumerate(values, 1):
        if census.due({"cpu": value}, step) and step >= 2:
            taken.append(step)
            census.census, census._used = object(), {"cpu": value}
    return taken


def test_census_schedule_follows_new_highs_at_a_bounded_count():
    flat = [100 * MiB] * 64
    assert _readings(PeakCensus(budget=0.0), flat) == [2]
    growing = [100 * MiB + step * MiB for step in range(64)]
    assert _readings(PeakCensus(budget=0.0), growing) == [2, 4, 8, 16, 32, 64]
    # a run that rises to a peak and falls back: the census stays at the peak
    spike = [100 * MiB] * 7 + [140 * MiB] + [100 * MiB] * 56
    assert _readings(PeakCensus(budget=0.0), spike) == [2, 8]
    # with time to spare, every new high that rises enough is censused...
    steep = [100 * MiB + step * 2 * MiB for step in range(10)]
    assert _readings(PeakCensus(budget=1e9), steep) == list(range(2, 11))
    # ...and enough is 1% of the reading at the last census: a rise of 0.5 MiB a step on
    # 100 MiB (a graph building up, the allocator's noise) is censused every third step
    slow = [100 * MiB + step * MiB // 2 for step in range(10)]
    assert _readings(PeakCensus(budget=1e9), slow) == [2, 5, 8]


def test_an_exception_lists_what_its_frames_hold(tmp_path):
    source = OOM.replace("{fail}", "raise ValueError('bad batch')")
    code, _, capture, _, err = _doctor(tmp_path, source)
    assert code == 1 and capture.outcome == "exception"
    (moment,) = [m for m in capture.holders if m.when == "exception"]
    assert any(s.holders and s.holders[0].path.startswith("cache[") for s in moment.storages)
    assert "who holds the largest storages when the script raised (after step 6)" in err


def test_the_last_step_of_steps_is_the_end(tmp_path):
    code, _, capture, _, _ = _doctor(tmp_path, FUNCTION_STYLE, "--steps", "5")
    assert code == 0 and capture.outcome == "max_steps"
    end = next(m for m in capture.holders if m.when == "end")
    assert end.step == 5
    (big,) = _held(end, 2 * MiB)
    assert big.holders[0].path == "self.stats.hist['acts']['big']"


def test_a_holder_path_from_a_capture_file_cannot_drive_the_terminal():
    import io

    from torchmem.model.holders import HeldStorage, HolderPath, HoldersMoment
    from torchmem.report.terminal import render_capture

    evil = HolderPath(path="x\x1b[2J\nforged line", code="y = 1\x1b]52;c;AAAA\x07")
    moment = HoldersMoment(when="peak", step=3, storages=(HeldStorage(
        nbytes=MiB, holders=(evil,), unreached=None),))
    capture = Capture(tool="torchmem doctor", version="0", argv=("t.py",),
                      started_at="2024-01-01T00:00:00Z", duration_s=1.0, exit_code=0,
                      outcome="ok", holders=(moment,))
    out = io.StringIO()
    render_capture(capture, file=out)
    text = out.getvalue()
    assert "\x1b" not in text and "\\x1b[2J\\nforged line" in text
    assert Capture.loads(json.dumps(capture.to_dict())).holders == (moment,)


EVAL = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
val = [torch.randn(256, 64) for _ in range(16)]
history = {"val_preds": []}


def evaluate():
    model.eval()
    for xb in val:
        pred = model(xb)
        history["val_preds"].append(pred)
    model.train()


for epoch in range(3):
    for i in range(8):
        loss = model(torch.randn(32, 64)).square().mean()
        opt.zero_grad(); loss.backward(); opt.step()
    evaluate()
"""


def test_the_peak_of_the_evaluation_passes_names_what_they_keep(tmp_path):
    code, script, capture, _, err = _doctor(tmp_path, EVAL)
    assert code == 0
    (moment,) = [m for m in capture.holders if m.when == "eval_peak"]
    assert moment.note.startswith("evaluation pass ")
    saved = [s for s in moment.storages if s.role == "activation"]
    assert saved, moment
    # the census runs in the forward hook, when the local `pred` still holds the previous
    # output (also history's last item); storages of equal size are listed in any order,
    # so the one listed first may be that one, reached first through the local
    held = [h for s in saved for h in s.holders]
    assert all(h.path == "pred.grad_fn" or h.path.startswith("history['val_preds'][")
               for h in held), held
    holder = next(h for h in held if h.path.startswith("history['val_preds']["))
    assert holder.path.endswith("].grad_fn")
    assert (holder.file, holder.line) == (script, _line(EVAL, 'history["val_preds"].append(pred)'))
    assert "who holds the largest storages at the peak of the evaluation passes" in err
    # the capture's largest storages stay those of the training peak's census
    peak = next(m for m in capture.holders if m.when == "peak")
    assert [s.nbytes for s in capture.top_storages[:5]] == [s.nbytes for s in peak.storages[:5]]


def test_forwards_that_were_a_training_step_give_back_the_evaluation_peak_before_them():
    from types import SimpleNamespace

    from torchmem.doctor.steps import UserFrames

    run = SimpleNamespace(steps=[], step_count=0, main_globals={}, frames=UserFrames())
    census = PeakCensus(budget=0.0, rise=0.0)  # a census at each new high of 64 KiB
    base = 100 * MiB

    def forward(number, index, counter, heap):
        census.at_pass_step(run, {"pass": number, "index": index, "counter": counter,
                                  "heap": heap, "frame": None})
        moment = census.moments.get("eval_peak")
        return moment.note if moment is not None else None

    assert forward(1, 1, 1, base) == "evaluation pass 1, after its forward 1"
    assert forward(2, 1, 2, base + MiB) == "evaluation pass 2, after its forward 1"
    assert forward(2, 2, 3, base + MiB // 2) == "evaluation pass 2, after its forward 1"
    assert forward(2, 3, 4, base + 2 * MiB) == "evaluation pass 2, after its forward 3"
    census.drop_pass({"pass": 2, "from_counter": 4, "whole": False})
    assert census.moments["eval_peak"].note == "evaluation pass 2, after its forward 1"
    assert census._eval == (base + MiB, base + MiB)
    census.drop_pass({"pass": 2, "from_counter": 2, "whole": True})
    assert census.moments["eval_peak"].note == "evaluation pass 1, after its forward 1"
    assert census._eval == (base, base)
    census.drop_pass({"pass": 1, "from_counter": 1, "whole": True})  # not the pass in progress
    assert census.moments["eval_peak"].note == "evaluation pass 1, after its forward 1"


# 40 equal outputs kept in a list; the newest is also the local `out`
TIES = """
import torch

model = torch.nn.Linear(64, 256)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
kept = []
for step in range(40):
    out = model(torch.randn(128, 64))
    kept.append(out)
    opt.zero_grad()
    out.square().mean().backward(retain_graph=True)
    opt.step()
"""


def test_equal_storages_are_shown_by_their_holder_path_not_by_census_order(tmp_path):
    """Which of many equal storages the report shows is decided by their paths
    (`kept[0]`, `kept[1]`: numbers as numbers), the same on every run."""
    code, _, capture, _, _ = _doctor(tmp_path, TIES)
    assert code == 0
    for moment in capture.holders:
        outs = _held(moment, 128 * 256 * 4)
        paths = [s.holders[0].path for s in outs if s.holders]
        assert paths, moment
        assert paths == [f"kept[{i}]" for i in range(len(paths))], (moment.when, paths)


def test_ties_and_natural_order_helpers():
    from torchmem.doctor.census_holders import _natural, _with_ties

    words = lambda e: e[0]  # noqa: E731
    rows = [(5, "a"), (3, "b"), (3, "c"), (3, "d"), (1, "e")]
    assert _with_ties(rows, 2, words) == rows[:4]  # the 2nd ties with two more
    assert _with_ties(rows, 1, words) == rows[:1]
    assert _with_ties(rows, 9, words) == rows
    assert _with_ties(rows, 0, words) == []
    assert sorted(["xs[10]", "xs[2]", "xs[1]"], key=_natural) == ["xs[1]", "xs[2]", "xs[10]"]


def test_models_no_name_owns_are_walked_by_the_census_without_error(doctor):
    # the models kept as keys of an unbounded cache: the allocation sites of `--lines`
    # name their holders with the census's walker, which walks every module's own
    # parameters too (the walk's flag for them reaches that walker), and completes
    script = Path(__file__).parent / "scripts_unit" / "cache_keyed_by_models.py"
    data, _ = doctor.run_file(script, "--no-verify", "--lines")
    notes = [*data["notes"], *(data["line_profile"] or {}).get("notes", [])]
    assert not [n for n in notes if "analysis incomplete" in n], notes
    assert data["findings"][0]["culprit"]["name"] == "layer_names"
