"""`torchmem doctor` on the command line: report, JSON capture, exit codes, bad input."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from torchmem.cli import main

LEAKY = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
kept = []
for i in range(24):
    out = model(torch.randn(128, 64))
    loss = out.pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    kept.append(out)
print("done")
sys.exit(3)
"""


def test_report_json_and_exit_code(tmp_path: Path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(LEAKY), encoding="utf-8")
    out_json = tmp_path / "cap.json"
    code = main(["doctor", "--interval", "0", "--json", str(out_json), str(script)])
    captured = capsys.readouterr()
    assert code == 3  # the script's own exit code
    assert captured.out == "done\n"  # the script's stdout is untouched
    assert "retained autograd graph" in captured.err
    assert "`kept`" in captured.err and "train.py:11" in captured.err
    data = json.loads(out_json.read_text())
    assert data["schema_version"] >= 1 and data["tool"] == "torchmem doctor"
    (finding,) = data["findings"]
    assert finding["cause"] == "retained_graph"
    assert finding["culprit"]["name"] == "kept" and finding["culprit"]["line"] == 11
    assert finding["bytes_per_step"] > 128 * 64 * 4 * 0.9
    assert data["growth"][0]["verdict"] == "growing"


@pytest.mark.parametrize("argv, message", [
    (["doctor", "--steps", "0", "x.py"], "--steps must be at least 1"),
    (["doctor", "missing_script.py"], "script not found"),
    (["doctor"], "expected a script to run"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err
