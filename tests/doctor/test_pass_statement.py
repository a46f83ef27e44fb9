"""Graphs kept by a comprehension that runs a whole evaluation pass: no name holds the
list while it is built, the statement is named. Through the real command line (the pass
verdict reads the process's heap), next to its healthy twin under ``no_grad``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts_unit"


def test_a_comprehension_that_keeps_every_output_with_its_graph(doctor):
    data, _ = doctor.run_file(SCRIPTS / "eval_comprehension_with_grad.py")
    top = data["findings"][0]
    assert (top["cause"], top["culprit"]["name"], top["culprit"]["line"]) == (
        "eval_graph", "preds", 14)
    assert top["data"]["phase"] == "eval-grad"
    assert top["fix_kind"] == "advice" and "torch.no_grad()" in top["fix"]
    assert any("comprehension's stack" in e for e in top["evidence"])


def test_the_same_comprehension_under_no_grad_is_healthy(doctor):
    data, _ = doctor.run_file(SCRIPTS / "healthy_eval_comprehension_no_grad.py")
    assert data["findings"] == []
