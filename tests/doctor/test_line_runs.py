"""The statement named for a culprit is one that ran: a branch never taken is not named.

Unit tests of :class:`torchmem.doctor.line_runs.LineWatch` (real ``sys.settrace``), and the
doctor on scripts whose hook appends in both branches of an ``if``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from torchmem.doctor.line_runs import LineRuns, LineWatch, did_not_run, observed

BRANCHES = """
def hook(flag, out):
    if flag:
        out.append(1)
    else:
        out.append(2)


def unused(out):
    out.append(3)
"""


def _module(tmp_path: Path) -> tuple[str, dict]:
    file = str(tmp_path / "branches.py")
    Path(file).write_text(BRANCHES, encoding="utf-8")
    namespace: dict = {}
    exec(compile(BRANCHES, file, "exec"), namespace)  # noqa: S102 - the test's own code
    return file, namespace


def test_a_branch_not_taken_did_not_run_and_code_not_entered_is_unknown(tmp_path):
    file, ns = _module(tmp_path)
    watch = LineWatch(lambda f: f == file)
    if sys.gettrace() is not None:
        pytest.skip("the tests run under a tracer (debugger, coverage)")
    assert watch.arm(sys._getframe())
    out: list = []
    for _ in range(3):
        ns["hook"](False, out)
    watch.disarm()
    assert sys.gettrace() is None
    runs = watch.runs
    assert runs.did_not_run(file, 4)  # `out.append(1)`: its function ran, the line never
    assert not runs.did_not_run(file, 6)  # `out.append(2)` ran
    assert not runs.did_not_run(file, 10)  # `unused` never entered: unknown
    ns["hook"](True, out)  # not watched any more: nothing recorded
    assert runs.did_not_run(file, 4)


def test_both_branches_taken_over_the_watched_steps_both_ran(tmp_path):
    file, ns = _module(tmp_path)
    watch = LineWatch(lambda f: f == file)
    if sys.gettrace() is not None:
        pytest.skip("the tests run under a tracer (debugger, coverage)")
    assert watch.arm(sys._getframe())
    ns["hook"](True, [])
    watch.disarm()
    assert watch.arm(None)  # a second watched step
    ns["hook"](False, [])
    watch.disarm()
    assert not watch.runs.did_not_run(file, 4) and not watch.runs.did_not_run(file, 6)


def test_never_replaces_another_tracer(tmp_path):
    file, ns = _module(tmp_path)
    watch, other = LineWatch(lambda f: f == file), LineWatch(lambda f: f == file)
    if sys.gettrace() is not None:
        pytest.skip("the tests run under a tracer (debugger, coverage)")
    assert other.arm(None)
    try:
        assert not watch.arm(sys._getframe()) and not watch.armed
        ns["hook"](True, [])
    finally:
        other.disarm()
    assert not watch.runs.ran and other.runs.ran


def test_did_not_run_answers_only_inside_observed(tmp_path):
    runs = LineRuns(ran={"/x.py": {6}}, entered={"/x.py": {3, 4, 6}})
    assert not did_not_run("/x.py", 4)
    with observed(runs):
        assert did_not_run("/x.py", 4) and not did_not_run("/x.py", 6)
    assert not did_not_run("/x.py", 4)


SCRIPT = """
import torch
torch.manual_seed(0)
spiking = {spiking}
history = []


def record():  # reads the loop's `out`
    if spiking:
        history.append(out[0])
    else:
        history.append(out)


model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(48):
    {body}
    out = model(torch.randn(32, 16))
    record()
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
"""


def _script(spiking: str, body: str = "pass") -> str:
    return textwrap.dedent(SCRIPT).replace("{spiking}", spiking).replace("{body}", body)


def _culprit(capture: dict) -> dict:
    (finding,) = [f for f in capture["findings"]
                  if (f.get("culprit") or {}).get("name") == "history"]
    return finding["culprit"]


def test_doctor_names_the_first_branch_when_it_is_the_one_that_runs(doctor):
    source = _script("True")  # twin: the other branch
    capture, _ = doctor.run(source)
    assert _culprit(capture)["line"] == doctor.line(source, "history.append(out[0])")


def test_doctor_with_both_branches_running_keeps_the_source_order(doctor):
    # near miss: both appends run (alternate steps), nothing is set aside
    source = _script("False", "spiking = step % 2 == 0")
    capture, _ = doctor.run(source)
    assert _culprit(capture)["line"] == doctor.line(source, "history.append(out[0])")


def test_not_running_only_breaks_ties_between_statements_alike(tmp_path):
    from torchmem.doctor.source import find_statements
    from torchmem.doctor.statement_rank import best_statement

    path = tmp_path / "m.py"
    path.write_text("class M:\n    def __init__(self):\n        self.kept = []\n\n"
                    "    def step(self, x, flag, show):\n        if flag:\n"
                    "            self.kept.append(x[0])\n        else:\n"
                    "            self.kept.append(x)\n        if show:\n"
                    "            self.kept += [x]\n", encoding="utf-8")
    found = find_statements("self.kept", [str(path)])
    file = str(path)
    # the `else:` branch ran, the `if` one did not: the tie goes to the one that ran
    with observed(LineRuns(ran={file: {6, 9, 10}}, entered={file: {3, 6, 7, 9, 10, 11}})):
        assert best_statement(found, "container").line == 9
    # no append ran in the watched steps (they run now and then): an append still beats
    # the initialisation and the `+=`, as without the watch
    with observed(LineRuns(ran={file: {6, 10}}, entered={file: {3, 6, 7, 9, 10, 11}})):
        assert best_statement(found, "container").line == 7
    assert best_statement(found, "container").line == 7  # unwatched: the source order
