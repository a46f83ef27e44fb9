"""torch's backward-twice and in-place errors explained as the symptoms they are.

Each script dies with torch's own error at its second step; the doctor must name the line
that causes it and the fix, instead of "no findings (run more steps)".
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchmem.doctor.probe import DoctorProbe
from torchmem.doctor.runner import Target, run_script

RNN = '''
import torch

torch.manual_seed(0)
cell = torch.nn.RNNCell(8, 16)
head = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)
h = torch.zeros(4, 16)
for step in range(20):
    x = torch.randn(4, 8)
    h = cell(x, h)
    loss = head(h).pow(2).mean()
    opt.zero_grad()
    loss.backward({flags})
    opt.step()
'''

LSTM_IN_FUNCTION = '''
import torch

torch.manual_seed(0)
lstm = torch.nn.LSTM(8, 16, batch_first=True)
head = torch.nn.Linear(16, 1)
opt = torch.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=1e-3)


def train(chunks):
    state = None
    for x in chunks:
        out, state = lstm(x, state)
        loss = head(out[:, -1]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


train([torch.randn(2, 5, 8) for _ in range(10)])
'''

INPLACE = '''
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(x):
    y = torch.sigmoid(model(x))
    y += 1
    loss = y.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


for step in range(10):
    train_step(torch.randn(4, 8))
'''


def _doctor(tmp_path: Path, source: str):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    probe = DoctorProbe(census_at_end=False)
    result = run_script(Target(path=str(path)), [probe], monitor_interval=None)
    assert result.outcome == "exception" and result.exit_code == 1
    assert not probe.errors, probe.errors
    assert probe.findings, "torch's error was reported as no findings"
    return probe.findings[0], result


def test_backward_a_second_time_names_the_carried_state(tmp_path, capsys):
    top, result = _doctor(tmp_path, RNN.format(flags=""))
    assert "second time" in result.error
    assert top.cause == "hidden_state_chain"
    assert top.culprit.name == "h"
    assert top.culprit.line == 11 and top.culprit.code == "h = cell(x, h)"
    assert "`h = h.detach()`" in top.fix and "line 11" in top.fix
    assert any("second time" in e for e in top.evidence)
    assert top.data["failed_line"] == 14


def test_a_tuple_state_carried_inside_a_function(tmp_path, capsys):
    top, _ = _doctor(tmp_path, LSTM_IN_FUNCTION)
    assert top.cause == "hidden_state_chain"
    assert top.culprit.name == "state"
    assert top.culprit.code == "out, state = lstm(x, state)"
    assert "state = tuple(t.detach() for t in state)" in top.fix


def test_version_error_after_retain_graph_is_the_carried_state(tmp_path, capsys):
    # retain_graph=True "fixes" the first error; then optimizer.step() has updated the
    # parameters the older steps' graphs saved
    top, result = _doctor(tmp_path, RNN.format(flags="retain_graph=True"))
    assert "modified by an inplace operation" in result.error
    assert top.cause == "hidden_state_chain"
    assert top.culprit.name == "h" and top.culprit.line == 11
    assert "`h = h.detach()`" in top.fix and "retain_graph=True is not needed" in top.fix


def test_version_error_of_an_inplace_op_names_the_op(tmp_path, capsys):
    top, _ = _doctor(tmp_path, INPLACE)
    assert top.cause == "inplace_modified"
    assert top.culprit.name == "y"
    assert top.culprit.line == 11 and top.culprit.code == "y += 1"
    assert "`Sigmoid`" in top.evidence[0] and "[4, 8]" in top.evidence[0]
    assert "line 11" in top.fix


def test_other_errors_get_no_crash_finding(tmp_path, capsys):
    path = tmp_path / "train.py"
    path.write_text("import torch\nfor i in range(3):\n    (torch.randn(2, requires_grad=True) * 2)"
                    ".sum().backward()\nraise RuntimeError('mine')\n", encoding="utf-8")
    probe = DoctorProbe(census_at_end=False)
    run_script(Target(path=str(path)), [probe], monitor_interval=None)
    assert probe.findings == [] and probe.crash is None
