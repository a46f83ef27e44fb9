"""plan_checkpoints() and checkpointed(): plans judged on fake tensors, checked for real."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import torchmem
from torchmem.errors import UsageError
from torchmem.plan.checkpoint import block_names


class Stack(nn.Module):
    def __init__(self, width: int = 256, blocks: int = 4) -> None:
        super().__init__()
        self.embed = nn.Linear(64, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
            for _ in range(blocks)
        )
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def _step_peak(model: nn.Module, x: torch.Tensor, y: torch.Tensor, names: tuple[str, ...]) -> int:
    """The real peak of two SGD steps with ``names`` checkpointed (exact CPU Tracker)."""
    m = copy.deepcopy(model)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with torchmem.checkpointed(m, names), torchmem.track("cpu") as t:
        for _ in range(2):
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            del loss
    return t.peak_delta


def test_blocks_are_the_children_of_the_outermost_containers() -> None:
    assert block_names(Stack()) == ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]
    assert block_names(nn.Sequential(nn.Linear(2, 2), nn.ReLU())) == ["0", "1"]
    assert block_names(nn.Linear(2, 2)) == []


def test_plan_fits_the_budget_and_the_real_step_agrees() -> None:
    torch.manual_seed(0)
    model = Stack()
    x, y = torch.randn(512, 64), torch.randint(0, 10, (512,))
    kw = dict(loss_fn=F.cross_entropy, target=y, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    full = torchmem.estimate(model, x, **kw)
    every = torchmem.estimate(model, x, checkpoint=block_names(model), **kw)
    assert every.peak_bytes < full.peak_bytes  # checkpointing saves memory at all
    budget = (full.peak_bytes + every.peak_bytes) // 2
    plan = torchmem.plan_checkpoints(model, x, budget=budget, **kw)
    assert plan.fits and plan.peak_after <= budget < plan.peak_before == full.peak_bytes
    assert 0 < len(plan.checkpoint) < 4  # the fewest blocks, not all of them
    assert [t.checkpoint for t in plan.trials][-1] == plan.checkpoint
    static = full.parameter_bytes + full.input_bytes
    assert _step_peak(model, x, y, plan.checkpoint) == plan.peak_after - static
    assert _step_peak(model, x, y, ()) == full.peak_bytes - static


def test_checkpointed_gives_the_same_gradients_and_restores_the_model() -> None:
    torch.manual_seed(0)
    model = Stack(width=32, blocks=2)
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    F.cross_entropy(model(x), y).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with torchmem.checkpointed(model, ["blocks.0", "blocks.1"]):
        assert "forward" in vars(model.blocks[0])
        F.cross_entropy(model(x), y).backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(plain, model.parameters()))
    assert "forward" not in vars(model.blocks[0])
    with pytest.raises(UsageError, match="no submodule named 'blocks.9'"):
        with torchmem.checkpointed(model, ["blocks.9"]):
            pass


def test_budget_out_of_reach_and_already_met() -> None:
    model = Stack(width=32, blocks=2)
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    low = torchmem.plan_checkpoints(model, x, budget=1, loss_fn=F.cross_entropy, target=y)
    assert not low.fits and low.checkpoint == ("blocks.0", "blocks.1")
    high = torchmem.plan_checkpoints(model, x, budget="1 GiB", loss_fn=F.cross_entropy, target=y)
    assert high.fits and high.checkpoint == () and high.saved_bytes == 0
    assert "fits 1.0 GiB" in repr(high)
    with pytest.raises(UsageError, match="budget"):
        torchmem.plan_checkpoints(model, x, budget=0, loss_fn=F.cross_entropy, target=y)


@pytest.mark.slow
def test_the_example_runs_and_its_plan_holds() -> None:
    """examples/plan_memory.py: a meta-device model estimated, then a plan run for real."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "plan_memory.py"
    proc = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Estimate(peak " in proc.stdout and "on meta" in proc.stdout
    measured, planned = re.search(r"measured peak (.+) \(planned (.+)\)", proc.stdout).groups()
    assert measured == planned
