"""CPU per-line figures are exact: known allocations on known lines, sums that add up to
the measured delta (and to an independent scan of live tensors), the peak's composition,
allocating stacks, and nothing left behind."""

from __future__ import annotations

import gc
import sys

import pytest
import torch

import torchmem
from torchmem.collect._engine import engine
from torchmem.collect.lines import LineRecorder
from torchmem.collect.live import live_tensor_bytes
from torchmem.collect.sites import SiteFinder
from torchmem.errors import UsageError

HERE = __file__


def _line(marker: str) -> int:
    """The line of this file that ends with ``# <marker>``."""
    with open(HERE, encoding="utf-8") as fh:
        for n, text in enumerate(fh, 1):
            if text.rstrip().endswith(f"# {marker}"):
                return n
    raise AssertionError(marker)


KEEP: list[torch.Tensor] = []


def known_step() -> None:
    a = torch.empty(1000)  # L-a
    b = torch.empty(250, dtype=torch.float64)  # L-b
    KEEP.append(b)
    c = a + 1  # L-c
    del a, c


@pytest.fixture(autouse=True)
def _clean():
    KEEP.clear()
    # tensors an earlier test of the process left in cyclic garbage must not die inside a
    # measured window: its delta of live bytes would count them
    gc.collect()
    yield
    KEEP.clear()
    assert engine.observer is None


def test_known_allocations_on_known_lines_exact_bytes():
    report = torchmem.profile_lines(known_step, steps=3)
    rows = {r.line: r for r in report.lines if r.file == HERE}
    a, b, c = rows[_line("L-a")], rows[_line("L-b")], rows[_line("L-c")]
    assert (a.allocated_bytes, a.alive_bytes, a.delta_bytes, a.allocations) == (4000, 0, 0, 1)
    assert (b.allocated_bytes, b.alive_bytes, b.delta_bytes) == (2000, 2000, 2000)
    assert (c.allocated_bytes, c.alive_bytes, c.delta_bytes) == (4000, 0, 0)
    assert a.code == "a = torch.empty(1000)  # L-a" and a.function == "known_step"
    # the peak of a call: a and c alive together on top of what b kept
    assert rows[_line("L-c")].peak_bytes == 4000 and rows[_line("L-a")].peak_bytes == 4000
    for w in report.profile.profiled:
        assert w.delta_bytes == 2000 and w.unattributed_bytes == 0


def _mlp_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    losses = []

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss)  # keeps each step's graph: the memory grows

    return step, losses


def test_per_line_sums_equal_the_measured_and_the_scanned_delta():
    step, losses = _mlp_step()
    step()  # a first step outside the windows: its storages have no line
    recorder = LineRecorder(SiteFinder())
    recorder.install()
    try:
        for n in range(1, 5):
            before = live_tensor_bytes().get("cpu", 0)
            recorder.begin(n)
            step()
            window = recorder.end()
            after = live_tensor_bytes().get("cpu", 0)
            assert window is not None and window.measured_delta is not None
            # per line + unattributed == the engine's exact delta == an independent scan
            assert window.attributed_delta == window.measured_delta == after - before
            assert window.measured_delta > 0  # the kept graphs
    finally:
        recorder.uninstall()
    assert len(losses) == 5


def test_profile_lines_ranks_the_retaining_statement_first():
    step, losses = _mlp_step()
    report = torchmem.profile_lines(step, steps=4)
    first = report.lines[0]
    assert first.code == "losses.append(loss)  # keeps each step's graph: the memory grows"
    assert first.retains is not None and "losses" in first.retains
    assert first.retained_bytes > 0
    assert len(losses) == 4


def _helper(n: int) -> torch.Tensor:
    return torch.zeros(n)  # L-helper


def big_step() -> None:
    KEEP.append(_helper(1 << 16))  # L-caller


def test_stack_of_a_large_storage_user_frames_first():
    report = torchmem.profile_lines(big_step, steps=2)
    assert report.find(_line("L-helper"), HERE).allocated_bytes == 1 << 18
    site = next(s for s in report.profile.sites if s.nbytes == 1 << 18 and s.made_in)
    user = [(f.file, f.line) for f in site.stack if f.user]
    assert user[:2] == [(HERE, _line("L-helper")), (HERE, _line("L-caller"))]
    assert site.shape == (1 << 16,) and site.dtype == "float32"
    assert site.made_in in ("step 1", "step 2")


def test_all_files_attributes_to_library_lines():
    layer = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)

    def forward() -> None:
        KEEP.append(layer(x))

    mine = torchmem.profile_lines(forward, steps=1)
    assert {r.file for r in mine.lines} == {HERE}
    library = torchmem.profile_lines(forward, steps=1, all_files=True)
    files = {r.file for r in library.lines if r.allocated_bytes}
    assert any(f.endswith("linear.py") for f in files) and HERE not in files


def test_the_profile_leaves_nothing_installed_when_the_function_raises():
    had_ledger = "cpu" in engine._kept

    def broken() -> None:
        torch.empty(10)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        torchmem.profile_lines(broken, steps=2)
    assert engine.observer is None
    assert ("cpu" in engine._kept) == had_ledger
    assert sys.getrefcount(broken) >= 2


def test_refusals():
    with pytest.raises(UsageError, match="steps must be at least 1"):
        torchmem.profile_lines(known_step, steps=0)
    recorder = LineRecorder(SiteFinder())
    recorder.install()
    try:
        with pytest.raises(UsageError, match="already running"):
            torchmem.profile_lines(known_step)
    finally:
        recorder.uninstall()
