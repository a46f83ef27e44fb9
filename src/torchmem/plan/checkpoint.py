"""``torchmem.plan_checkpoints()``: what to checkpoint so a training step fits a budget.

Activation checkpointing (``torch.utils.checkpoint``) drops a module's activations after
its forward and recomputes them during backward: less memory, one more forward of that
module. Checkpointing everything is the most memory-frugal and the slowest; the plan is
the *fewest* modules that bring the estimated peak under the budget.

The search is greedy and every candidate set is judged by :func:`torchmem.estimate`
with the set checkpointed, on fake tensors, so nothing is allocated and the figures are
the same aten ops' exact tensor bytes. A block joins the plan only if checkpointing it
lowers the estimated peak (a ReLU's checkpointing saves nothing: it is left out). When
the budget is out of reach the plan says what the lowest peak is made of (parameters,
gradients, optimizer state, inputs, activations) and which part dominates.
Candidates, largest activations first, are the blocks of the model: the children of
its ``nn.ModuleList`` / ``nn.Sequential`` containers (outermost first), or the model's
own children when it has none. The plan
is applied with :func:`torchmem.checkpointed` around the training loop.

Cost: one estimate per candidate tried (each about the cost of one step's Python and
dispatch work, no kernel runs), so O(blocks) estimates in the worst case.

Known limitations:
    * Greedy by activation size, not an optimal solver: a cheaper set may exist when
      blocks differ in recompute cost.
    * The estimate's own limits apply (see :mod:`torchmem.plan.estimate`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import nn

from torchmem._calls import renamed
from torchmem.errors import TorchmemError, UsageError
from torchmem.model.estimate import CheckpointPlan, CheckpointTrial, Estimate
from torchmem.plan.estimate import estimate
from torchmem.plan.wrap import check_names
from torchmem.units import parse_budget

__all__ = ["plan_checkpoints", "block_names"]


def block_names(model: nn.Module) -> list[str]:
    """The model's blocks: children of its ``ModuleList``/``Sequential`` containers
    (outermost containers only), or the model's children when it has no container."""
    blocks: list[str] = []
    inside: list[str] = []
    for name, module in model.named_modules():
        if any(name.startswith(p + ".") for p in inside):
            continue
        if isinstance(module, (nn.ModuleList, nn.Sequential)) and len(module) > 1:
            inside.append(name)
            prefix = f"{name}." if name else ""
            blocks.extend(f"{prefix}{child}" for child, _ in module.named_children())
    if not blocks:
        blocks = [name for name, _ in model.named_children()]
    return blocks


def plan_checkpoints(
    model: nn.Module,
    *inputs: Any,
    budget: int | str,
    loss_fn: Callable[..., torch.Tensor],
    target: Any = None,
    optimizer: torch.optim.Optimizer | None = None,
    candidates: Iterable[str] | None = None,
    steps: int = 2,
    device: str | torch.device | None = None,
) -> CheckpointPlan:
    """Choose the fewest submodules to checkpoint so the step's peak fits ``budget``.

    Args:
        model, inputs, loss_fn, target, optimizer, steps, device: the training step, as
            for :func:`torchmem.estimate`.
        budget: the peak to fit, in bytes or as text (``"6 GiB"``).
        candidates: module names to choose from (default: :func:`block_names`).

    Returns:
        A :class:`~torchmem.model.estimate.CheckpointPlan`; ``fits`` says whether the
        budget was met, ``explain()`` why not (the floor and what it is made of).

    Raises:
        UsageError: a bad budget, no candidates, a candidate that is not a submodule,
            or what :func:`torchmem.estimate` raises (named ``plan_checkpoints``).

    Example:
        >>> plan = torchmem.plan_checkpoints(model, x, budget="2 GiB",   # doctest: +SKIP
        ...                                  loss_fn=F.cross_entropy, target=y, optimizer=opt)
        >>> with torchmem.checkpointed(model, plan.checkpoint):          # doctest: +SKIP
        ...     train(model)
    """
    budget_bytes = parse_budget(budget, "plan_checkpoints")
    names = list(candidates) if candidates is not None else block_names(model)
    if not names:
        raise UsageError(
            "torchmem.plan_checkpoints: the model has no submodules to checkpoint; "
            "expected a model with children, or candidates=[...]",
            tip="pass candidates=[...] with names from model.named_modules()",
        )
    if isinstance(model, nn.Module):
        check_names(model, names, "plan_checkpoints")

    def run(chosen: list[str], per_module: bool = False) -> Estimate:
        try:
            return estimate(model, *inputs, loss_fn=loss_fn, target=target,
                            optimizer=optimizer, steps=steps, device=device,
                            per_module=per_module, checkpoint=chosen)
        except TorchmemError as err:  # the user called plan_checkpoints, not estimate
            raise renamed(err, "plan_checkpoints") from err.__cause__

    base = run([], per_module=True)
    trials = [CheckpointTrial((), base.peak_bytes)]
    if base.peak_bytes <= budget_bytes:
        return CheckpointPlan(budget_bytes, (), base.peak_bytes, base.peak_bytes, True,
                              tuple(names), tuple(trials))
    retained = {m.name: m.retained_bytes for m in base.modules}
    order = sorted(names, key=lambda n: (-retained.get(n, 0), names.index(n)))
    chosen: list[str] = []
    best = base
    for name in order:
        trial = run(chosen + [name])
        trials.append(CheckpointTrial(tuple(chosen + [name]), trial.peak_bytes))
        if trial.peak_bytes >= best.peak_bytes:
            continue  # checkpointing it saves nothing: not in the plan
        chosen.append(name)
        best = trial
        if best.peak_bytes <= budget_bytes:
            break
    fits = best.peak_bytes <= budget_bytes
    floor, phase = None, ""
    if not fits:
        floor = best.parts_at_peak()
        where = best.peak_phase
        phase = f"step {where.step} {where.phase}" if where is not None else ""
    return CheckpointPlan(budget_bytes, tuple(chosen), base.peak_bytes, best.peak_bytes, fits,
                          tuple(names), tuple(trials), floor, phase)
