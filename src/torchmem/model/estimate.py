"""What a peak estimate found, as plain data (see :func:`torchmem.estimate`).

An :class:`Estimate` is the memory a training (or inference) step *would* need, worked
out on fake tensors before anything runs: the peak, what it is made of (parameters,
buffers, inputs, gradients, optimizer state, activations), the live bytes at the end of
each phase of each simulated step, and the bytes each module's forward leaves alive.

All byte figures are tensor storage bytes, the same measure as ``torchmem.census()``
and the CPU ``Tracker``: on CUDA, the caching allocator adds rounding (up to 511 bytes
a tensor) and workspaces (cuBLAS, cuDNN) on top.

This module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchmem.model._serde import Record
from torchmem.units import format_bytes

__all__ = [
    "ESTIMATE_SCHEMA_VERSION",
    "PhaseEstimate",
    "ModuleEstimate",
    "Estimate",
    "CheckpointTrial",
    "CheckpointPlan",
]

#: Version of :meth:`Estimate.to_dict` output.
ESTIMATE_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class PhaseEstimate(Record):
    """One phase of one simulated step.

    Attributes:
        step: 1-based step number.
        phase: ``"forward"`` (forward and loss), ``"backward"`` or ``"optimizer"``
            (``step()`` and ``zero_grad()``).
        peak_bytes: highest live bytes during the phase, everything included.
        end_bytes: live bytes when the phase ended.
    """

    step: int
    phase: str
    peak_bytes: int
    end_bytes: int


@dataclass(frozen=True)
class ModuleEstimate(Record):
    """What one module's forward does to memory (first simulated step).

    Attributes:
        name: module path as in ``named_modules()`` (``""`` is the model itself).
        type: class name, e.g. ``"Linear"``.
        retained_bytes: bytes its forward left alive: its output and what autograd
            saved for backward (summed over calls). Nested modules count again inside
            their parents.
        peak_bytes: highest live bytes during its forward, everything included.
        calls: times its forward ran in the step.
    """

    name: str
    type: str
    retained_bytes: int
    peak_bytes: int
    calls: int = 1


@dataclass(frozen=True)
class Estimate(Record):
    """The memory one step needs, worked out without running it.

    Attributes:
        device: the device the step was simulated on (``"cpu"``, ``"cuda:0"``...).
        peak_bytes: the highest live tensor bytes of any phase of any step.
        parameter_bytes: the model's parameters.
        buffer_bytes: its buffers.
        input_bytes: the inputs and the target.
        gradient_bytes: the parameters' gradients at the end of the first backward.
        optimizer_state_bytes: the optimizer's state after its first step.
        activation_bytes: bytes the first forward (and loss) left alive for backward.
        phases: every phase of every step, in order.
        modules: per-module figures, largest ``retained_bytes`` first.
        steps: steps simulated.
        backward: whether a backward pass was simulated.
        optimizer: the optimizer class simulated, or None.
        notes: what the estimate could not see (e.g. ops whose fake implementation
            allocates differently from the real kernel).
        elapsed_s: wall time the estimate took.
        schema_version: :data:`ESTIMATE_SCHEMA_VERSION`.
    """

    device: str
    peak_bytes: int
    parameter_bytes: int = 0
    buffer_bytes: int = 0
    input_bytes: int = 0
    gradient_bytes: int = 0
    optimizer_state_bytes: int = 0
    activation_bytes: int = 0
    phases: tuple[PhaseEstimate, ...] = ()
    modules: tuple[ModuleEstimate, ...] = ()
    steps: int = 1
    backward: bool = False
    optimizer: str | None = None
    notes: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    schema_version: int = ESTIMATE_SCHEMA_VERSION

    @property
    def peak_phase(self) -> PhaseEstimate | None:
        """The phase where the peak is reached (the first one, on a tie)."""
        best: PhaseEstimate | None = None
        for p in self.phases:
            if best is None or p.peak_bytes > best.peak_bytes:
                best = p
        return best

    def fits(self, budget_bytes: int) -> bool:
        """Whether the peak stays within ``budget_bytes``."""
        return self.peak_bytes <= budget_bytes

    def breakdown(self) -> dict[str, int]:
        """``{part: bytes}``: the sizes of the step's parts (not all live at the peak)."""
        return {
            "parameters": self.parameter_bytes,
            "buffers": self.buffer_bytes,
            "inputs": self.input_bytes,
            "gradients": self.gradient_bytes,
            "optimizer_state": self.optimizer_state_bytes,
            "activations": self.activation_bytes,
        }

    def __repr__(self) -> str:
        parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.breakdown().items() if v)
        where = self.peak_phase
        at = f"; peak in step {where.step} {where.phase}" if where is not None else ""
        return (
            f"Estimate(peak {format_bytes(self.peak_bytes)} on {self.device}"
            f"{': ' + parts if parts else ''}{at})"
        )


@dataclass(frozen=True)
class CheckpointTrial(Record):
    """One candidate set tried by the planner and the peak it was estimated at."""

    checkpoint: tuple[str, ...]
    peak_bytes: int


@dataclass(frozen=True)
class CheckpointPlan(Record):
    """Which submodules to run under activation checkpointing to fit a memory budget.

    Attributes:
        budget_bytes: the peak asked for.
        checkpoint: module names to checkpoint (``torchmem.checkpointed(model, ...)``),
            the fewest the greedy search needed, largest activations first.
        peak_before: estimated peak without checkpointing.
        peak_after: estimated peak with ``checkpoint``.
        fits: whether ``peak_after <= budget_bytes``; when False, ``checkpoint`` is every
            candidate and ``peak_after`` the lowest peak checkpointing reaches.
        candidates: the modules the search could choose from.
        trials: every set tried, in order.
    """

    budget_bytes: int
    checkpoint: tuple[str, ...]
    peak_before: int
    peak_after: int
    fits: bool
    candidates: tuple[str, ...] = ()
    trials: tuple[CheckpointTrial, ...] = ()

    @property
    def saved_bytes(self) -> int:
        """Estimated peak bytes the plan saves."""
        return self.peak_before - self.peak_after

    def __repr__(self) -> str:
        verdict = "fits" if self.fits else "does not fit"
        return (
            f"CheckpointPlan({verdict} {format_bytes(self.budget_bytes)}: checkpoint "
            f"{list(self.checkpoint)}, peak {format_bytes(self.peak_before)} -> "
            f"{format_bytes(self.peak_after)})"
        )
