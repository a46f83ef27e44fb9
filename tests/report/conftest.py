"""Captures built by hand, with known numbers, for the report tests."""

from __future__ import annotations

import pytest

from torchmem.model.capture import Capture, Culprit, Finding, Growth, StepRecord, StorageSummary

EVIL = "<script>alert('x')</script>"
MiB = 1 << 20


def make_capture(*, argv0: str = "train.py", findings: tuple[Finding, ...] | None = None,
                 steps: int = 20, per_step: int = MiB, tool: str = "torchmem doctor",
                 **overrides) -> Capture:
    records = tuple(
        StepRecord(step=i, time=0.1 * i, used={"cpu": 100 * MiB + per_step * i}, rss=400 * MiB)
        for i in range(1, steps + 1)
    )
    if findings is None:
        findings = (Finding(
            cause="retained_graph", title="retained autograd graph", device="cpu",
            bytes=per_step * steps, bytes_per_step=float(per_step),
            culprit=Culprit(name="losses", kind="local", file="/somewhere/train.py", line=41,
                            code="losses.append(loss)", function="train", type="list"),
            evidence=("`losses` holds 20 tensors with grad_fn",),
            data={"items": 20, "graph_nodes": 80},
            fix="store a number, not the graph: `losses.append(loss.item())`"),)
    fields = dict(
        tool=tool, version="0.1.0", argv=(argv0, "--epochs", "2"),
        started_at="2026-01-01T00:00:00Z", duration_s=2.5, exit_code=0, outcome="ok",
        step_source="optimizer", devices=("cpu",), steps=records,
        peak={"cpu": 100 * MiB + per_step * steps},
        growth=(Growth(device="cpu", verdict="growing", bytes_per_step=float(per_step), r2=1.0,
                       first_step=3, last_step=steps, total_growth=per_step * (steps - 3),
                       reason="grows linearly"),),
        findings=findings,
        top_storages=(StorageSummary(nbytes=4 * MiB, device="cpu", dtype="float32",
                                     shape=(1024, 1024), role="activation", name="x"),),
        bytes_by_role={"parameter": 2 * MiB, "activation": 6 * MiB},
        environment={"python": "3.11", "torch": "2.x"},
    )
    fields.update(overrides)
    return Capture(**fields)


@pytest.fixture
def capture() -> Capture:
    return make_capture()


@pytest.fixture(name="make_capture")
def make_capture_fixture():
    """The capture factory, for tests that need variations."""
    return make_capture
