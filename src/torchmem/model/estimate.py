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
from torchmem.units import format_bytes, parse_budget

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

    def fits(self, budget: int | str) -> bool:
        """Whether the peak stays within ``budget`` (bytes, or text such as ``"6 GiB"``).

        Raises:
            UsageError: ``budget`` is not a positive byte quantity.
        """
        return self.peak_bytes <= parse_budget(budget, "Estimate.fits")

    def parts_at_peak(self) -> dict[str, int]:
        """What the peak is made of: ``{part: bytes}``, the rest being
        ``"activations_and_temporaries"``.

        Parameters, buffers and inputs are live in every phase; the optimizer state from
        the end of the first ``step()`` on (during it, too); the gradients from the end
        of a backward to the optimizer's ``zero_grad()``. Whatever the peak holds beyond
        those is ``"activations_and_temporaries"`` (saved for backward, outputs, an
        optimizer's scratch tensors): the only part activation checkpointing can lower.
        """
        where = self.peak_phase
        parts = {"parameters": self.parameter_bytes, "buffers": self.buffer_bytes,
                 "inputs": self.input_bytes, "gradients": 0, "optimizer_state": 0}
        if where is not None:
            if where.phase in ("backward", "optimizer"):
                parts["gradients"] = self.gradient_bytes
            if where.phase == "optimizer" or where.step > 1:
                parts["optimizer_state"] = self.optimizer_state_bytes
        parts["activations_and_temporaries"] = max(self.peak_bytes - sum(parts.values()), 0)
        return parts

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
        fits: whether ``peak_after <= budget_bytes``; when False, ``peak_after`` is the
            lowest peak checkpointing reaches and ``checkpoint`` the blocks that lower it
            (never a block whose checkpointing leaves the peak where it was).
        candidates: the modules the search could choose from.
        trials: every set tried, in order (rejected blocks included).
        floor: when the budget is out of reach, what that lowest peak is made of
            (:meth:`Estimate.parts_at_peak`: parameters, buffers, inputs, gradients,
            optimizer state, and the activations and temporaries checkpointing could
            not remove).
        floor_phase: where that peak is, e.g. ``"step 1 optimizer"``.
    """

    budget_bytes: int
    checkpoint: tuple[str, ...]
    peak_before: int
    peak_after: int
    fits: bool
    candidates: tuple[str, ...] = ()
    trials: tuple[CheckpointTrial, ...] = ()
    floor: dict[str, int] | None = None
    floor_phase: str = ""

    @property
    def saved_bytes(self) -> int:
        """Estimated peak bytes the plan saves."""
        return self.peak_before - self.peak_after

    @property
    def dominant(self) -> str | None:
        """The largest part of the floor (``"optimizer_state"``...), or None."""
        if not self.floor:
            return None
        return max(self.floor.items(), key=lambda kv: (kv[1], kv[0]))[0]

    def explain(self) -> str:
        """One paragraph: what to checkpoint, or why the budget is out of reach."""
        budget = format_bytes(self.budget_bytes)
        if self.fits and not self.checkpoint:
            return f"fits {budget} without checkpointing (peak {format_bytes(self.peak_before)})"
        if self.fits:
            return (f"fits {budget}: checkpoint {', '.join(self.checkpoint)} lowers the peak "
                    f"from {format_bytes(self.peak_before)} to {format_bytes(self.peak_after)}")
        line = (f"{budget} is out of reach: the lowest peak checkpointing reaches is "
                f"{format_bytes(self.peak_after)}")
        if self.floor_phase:
            line += f" (in {self.floor_phase})"
        if self.floor:
            parts = ", ".join(f"{k.replace('_', ' ')} {format_bytes(v)}"
                              for k, v in self.floor.items() if v)
            line += f": {parts}"
            fixed = sum(v for k, v in self.floor.items() if k != _REST)
            line += (f". Checkpointing lowers only activations; the other parts are "
                     f"{format_bytes(fixed)}")
            dominant = self.dominant
            if dominant is not None and dominant != _REST:
                line += f", and {dominant.replace('_', ' ')} dominates"
                line += _ADVICE.get(dominant, "")
            elif dominant == _REST:
                line += (", and activations dominate: those outside the candidate blocks, "
                         "and the blocks' inputs, which checkpointing keeps; a smaller batch "
                         "lowers them")
        if self.checkpoint:
            line += (f". Checkpointing {', '.join(self.checkpoint)} still lowers the peak "
                     f"from {format_bytes(self.peak_before)}")
        else:
            line += ". No block's checkpointing lowers the peak"
        return line + "."

    def __repr__(self) -> str:
        verdict = "fits" if self.fits else "does not fit"
        floor = ""
        if not self.fits and self.dominant is not None:
            floor = f"; floor {format_bytes(self.peak_after)}, mostly {self.dominant}"
        return (
            f"CheckpointPlan({verdict} {format_bytes(self.budget_bytes)}: checkpoint "
            f"{list(self.checkpoint)}, peak {format_bytes(self.peak_before)} -> "
            f"{format_bytes(self.peak_after)}{floor})"
        )


_REST = "activations_and_temporaries"

_ADVICE = {
    "optimizer_state": (": a lighter optimizer (SGD, Adafactor, 8-bit Adam), its state "
                        "offloaded to the CPU, or a larger budget"),
    "parameters": ": lower-precision weights (bfloat16), sharding (FSDP), or a larger budget",
    "gradients": ": lower-precision or sharded gradients (FSDP), or a larger budget",
    "inputs": ": a smaller batch",
}
