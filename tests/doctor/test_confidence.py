"""Confidence is earned: a growth finding is ``high`` only when the device's memory grows.

Unit tests feed :func:`torchmem.doctor.confidence.calibrate` real verdicts from
:func:`torchmem.analyze.growth.growth_by_device`; the CLI test runs a short leaky script
through ``torchmem doctor``, where too few steps leave growth undecided.
"""

from __future__ import annotations

import json
import subprocess
import sys

from torchmem.analyze.growth import growth_by_device
from torchmem.doctor.confidence import GROWTH_CAUSES, calibrate
from torchmem.model.capture import CAUSES, Finding, StepRecord


def _steps(per_step: list[int]) -> list[StepRecord]:
    return [StepRecord(step=i + 1, time=float(i), used={"cpu": b}, peak={"cpu": b})
            for i, b in enumerate(per_step)]


def _finding(cause: str, **kw) -> Finding:
    return Finding(cause=cause, title="t", device="cpu", bytes_per_step=4096.0, **kw)


def test_growth_causes_are_causes():
    assert GROWTH_CAUSES <= set(CAUSES)


def test_a_growing_device_keeps_high():
    growth = growth_by_device(_steps([10_000_000 + 1_000_000 * i for i in range(30)]))
    assert growth[0].verdict == "growing"
    (f,) = calibrate([_finding("retained_graph")], growth)
    assert f.confidence == "high" and "device_growth" not in f.data


def test_undecided_growth_caps_at_medium_and_says_why():
    growth = growth_by_device(_steps([10_000_000 + 1_000_000 * i for i in range(5)]))
    assert growth[0].verdict == "undecided"
    (f,) = calibrate([_finding("growing_container")], growth)
    assert f.confidence == "medium" and f.data["device_growth"] == "undecided"
    assert "undecided" in f.evidence[-1]


def test_flat_memory_gives_low():
    growth = growth_by_device(_steps([10_000_000] * 30))
    assert growth[0].verdict == "flat"
    (f,) = calibrate([_finding("retained_graph", confidence="medium")], growth)
    assert f.confidence == "low" and "flat" in f.evidence[-1]


def test_findings_that_do_not_claim_growth_keep_their_confidence():
    growth = growth_by_device(_steps([10_000_000] * 30))
    kept = [_finding("grad_not_cleared"), _finding("fragmentation"),
            _finding("hidden_state_chain", data={"error": "backward_twice"})]
    assert calibrate(kept, growth) == kept


def test_no_measurement_is_not_high():
    (f,) = calibrate([_finding("eval_graph")], [])
    assert f.confidence == "medium" and f.data["device_growth"] == "unmeasured"


def test_a_short_leaky_run_is_reported_with_medium_confidence(tmp_path):
    (tmp_path / "short.py").write_text(
        "import torch\n"
        "model = torch.nn.Linear(32, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "losses = []\n"
        "for step in range(6):\n"
        "    loss = model(torch.randn(64, 32)).pow(2).mean()\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "    losses.append(loss)\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--json", "c.json",
                           "short.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    capture = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    (growth,) = capture["growth"]
    assert growth["verdict"] == "undecided"
    (finding,) = capture["findings"]
    assert finding["cause"] == "retained_graph" and finding["confidence"] == "medium"
    assert "cause: retained_graph, confidence medium" in proc.stderr
