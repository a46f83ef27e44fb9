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
    assert not low.fits
    for name in low.checkpoint:  # every block in the plan lowers the peak
        without = [n for n in low.checkpoint if n != name]
        assert torchmem.estimate(model, x, loss_fn=F.cross_entropy, target=y,
                                 checkpoint=without).peak_bytes > low.peak_after
    high = torchmem.plan_checkpoints(model, x, budget="1 GiB", loss_fn=F.cross_entropy, target=y)
    assert high.fits and high.checkpoint == () and high.saved_bytes == 0
    assert "fits 1.0 GiB" in repr(high)
    with pytest.raises(UsageError, match="budget"):
        torchmem.plan_checkpoints(model, x, budget=0, loss_fn=F.cross_entropy, target=y)


class Mlp(nn.Module):
    """Blocks of Linear + ReLU: a ReLU's checkpointing saves nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                 nn.Linear(512, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def test_unreachable_budget_names_the_floor_and_plans_no_useless_block() -> None:
    # the seed checkpointed every block, ReLUs included, for nothing, and did not say that
    # Adam's state alone was over the budget
    torch.manual_seed(0)
    model = Mlp()
    x, y = torch.randn(4, 64), torch.randint(0, 10, (4,))
    opt = torch.optim.Adam(model.parameters())
    kw = dict(loss_fn=F.cross_entropy, target=y, optimizer=opt)
    est = torchmem.estimate(model, x, **kw)
    plan = torchmem.plan_checkpoints(model, x, budget=est.parameter_bytes, **kw)
    assert not plan.fits
    every = torchmem.estimate(model, x, checkpoint=block_names(model), **kw)
    assert plan.peak_after == every.peak_bytes  # the floor: everything checkpointed
    assert not any(isinstance(model.get_submodule(n), nn.ReLU) for n in plan.checkpoint)
    for name in plan.checkpoint:
        without = [n for n in plan.checkpoint if n != name]
        assert torchmem.estimate(model, x, checkpoint=without, **kw).peak_bytes > plan.peak_after
    assert plan.floor is not None and sum(plan.floor.values()) == plan.peak_after
    assert plan.floor["parameters"] == est.parameter_bytes
    assert plan.floor["optimizer_state"] == est.optimizer_state_bytes
    assert plan.dominant == "optimizer_state"
    text = plan.explain()
    assert text.startswith(f"{torchmem.format_bytes(plan.budget_bytes)} is out of reach")
    assert "optimizer state dominates" in text and "parameters" in text
    assert "mostly optimizer_state" in repr(plan)
    assert type(plan).from_dict(plan.to_dict()) == plan


def test_bad_budgets_and_candidates_name_plan_checkpoints() -> None:
    model = Stack(width=32, blocks=2)
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    kw = dict(loss_fn=F.cross_entropy, target=y)
    for bad in ("bogus", "1.5", [1], -3):
        with pytest.raises(UsageError, match=r"^torchmem\.plan_checkpoints: .*budget.*'6 GiB'|"
                                             r"^torchmem\.plan_checkpoints: the budget must"):
            torchmem.plan_checkpoints(model, x, budget=bad, **kw)
    with pytest.raises(UsageError, match=r"^torchmem\.plan_checkpoints: no submodule named 'nope'"):
        torchmem.plan_checkpoints(model, x, budget=1, candidates=["nope"], **kw)
    # an error inside the estimate names the function the user called
    with pytest.raises(UsageError, match=r"^torchmem\.plan_checkpoints: .*target"):
        torchmem.plan_checkpoints(model, x, budget=1, loss_fn=F.cross_entropy, target=model(x))


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
