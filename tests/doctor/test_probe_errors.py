"""The doctor's probes on graphs of every node kind, and probe failures never read as health.

Custom ``autograd.Function`` nodes raise ``RuntimeError`` on ``saved_tensors`` once backward
freed them, ``torch.compile`` graphs are ``CompiledFunctionBackward`` nodes, and checkpointed
graphs hold saved tensors packed by hooks whose unpacking recomputes the forward. The doctor
must find the same leak in all of them, and when a part of its analysis fails anyway, the
report must say so instead of "no findings".
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchmem.doctor.probe import ANALYSIS_FAILED, DoctorProbe
from torchmem.doctor.runner import Target, run_script

LEAK = '''
import torch
{prelude}
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
{setup}
losses = []
for step in range({steps}):
    x = torch.randn(128, 64)
    out = {forward}
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
'''

CUSTOM = '''
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2
'''

CHECKPOINT = '''
from torch.utils.checkpoint import checkpoint
import sys
calls = sys.modules["tm_forward_calls"] = []


def block(t):
    calls.append(1)
    return model(t)
'''


def _script(tmp_path: Path, prelude: str, forward: str, steps: int = 40, setup: str = "") -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(LEAK).format(prelude=prelude, forward=forward, steps=steps,
                                                 setup=setup), encoding="utf-8")
    return path


def _doctor(path: Path, probe: DoctorProbe | None = None, max_steps: int | None = None):
    probe = probe or DoctorProbe(census_at_end=True)
    result = run_script(Target(path=str(path)), [probe], monitor_interval=None,
                        max_steps=max_steps)
    return probe, result


def _assert_losses_found(probe: DoctorProbe, result) -> None:
    assert result.exit_code == 0, result.error
    assert not probe.errors, probe.errors
    assert not result.notes, result.notes
    assert probe.findings, "the leak was reported as no findings"
    top = probe.findings[0]
    assert top.cause == "retained_graph"
    assert top.culprit.name == "losses"
    assert top.culprit.code == "losses.append(loss)"


def test_leak_through_a_custom_autograd_function_is_found(tmp_path, capsys):
    path = _script(tmp_path, CUSTOM, "Scale.apply(model(x))")
    probe, result = _doctor(path)
    _assert_losses_found(probe, result)
    assert probe.census is not None  # the census walks the same freed nodes


def test_leak_through_checkpoint_is_found_without_recomputing(tmp_path, capsys):
    import sys

    path = _script(tmp_path, CHECKPOINT, "checkpoint(block, x, use_reentrant=False)", steps=30)
    try:
        probe, result = _doctor(path)
        calls = sys.modules["tm_forward_calls"]
    finally:
        sys.modules.pop("tm_forward_calls", None)
    _assert_losses_found(probe, result)
    # one forward and one recomputation in backward per step: the doctor never unpacked
    assert len(calls) == 2 * 30


@pytest.mark.slow
def test_leak_through_torch_compile_is_found(tmp_path, capsys):
    # torch.compile needs a C++ compiler and takes tens of seconds to compile on a CPU
    path = _script(tmp_path, "", "compiled(x)", steps=24, setup="compiled = torch.compile(model)")
    probe, result = _doctor(path)
    _assert_losses_found(probe, result)


class _BrokenSnapshot(DoctorProbe):
    """A probe whose variable snapshot fails, as an unforeseen bug inside torchmem would."""

    def _snapshot(self, run, step, frame):
        raise RuntimeError("simulated failure inside the analysis")


def test_a_failed_analysis_is_never_a_clean_bill_of_health(tmp_path, capsys):
    from torchmem.report.findings import analysis_failures, findings_text
    from torchmem.report.html import render_html

    path = _script(tmp_path, CUSTOM, "Scale.apply(model(x))", steps=12)
    probe, result = _doctor(path, _BrokenSnapshot(census_at_end=False))
    assert result.exit_code == 0
    assert probe.findings == []
    failures = [n for n in probe.notes if n.startswith(ANALYSIS_FAILED)]
    assert len(failures) == 1  # one line, with how often it happened
    assert "variable snapshot at step 2: RuntimeError: simulated failure" in failures[0]
    assert "more times" in failures[0]
    capture = result.to_capture("torchmem doctor", findings=probe.findings,
                                growth=probe.growth, notes=probe.notes)
    assert analysis_failures(capture)
    text = "\n".join(findings_text(capture))
    assert "no findings" not in text
    assert "analysis was incomplete" in text and "simulated failure" in text
    page = render_html(capture)
    assert "No cause of memory growth" not in page
    assert "analysis was incomplete" in page
