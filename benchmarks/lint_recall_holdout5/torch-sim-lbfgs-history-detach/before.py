# Source: https://github.com/TorchSim/torch-sim/blob/e1280065d11a2746f50a466425ef44d8ddb41cc8/torch_sim/optimizers/lbfgs.py
# Adapted excerpt, before the fix https://github.com/TorchSim/torch-sim/commit/a78df6f6e146dfad0424f6d3368a2d147018da8e
# (trimmed to the code the fix touches; omitted lines are marked).
"""L-BFGS (Limited-memory BFGS) optimizer implementation.

This module provides a batched L-BFGS optimizer for atomic structure relaxation.
L-BFGS is a quasi-Newton method that approximates the inverse Hessian using
a limited history of position and gradient differences, making it memory-efficient
for large systems while achieving superlinear convergence near the minimum.

When cell_filter is active, forces are transformed using the deformation gradient
to work in the same scaled coordinate space as ASE's UnitCellFilter/FrechetCellFilter.
The prev_forces and prev_positions are stored in the scaled/fractional space to match
ASE's behavior exactly.
"""

from typing import TYPE_CHECKING, Any

import torch

import torch_sim as ts
from torch_sim.optimizers.cell_filters import (
    CellLBFGSState,
    _clamp_deform_grad_log,
    compute_cell_forces,
    deform_grad,
    frechet_cell_filter_init,
)
from torch_sim.optimizers.state import LBFGSState
from torch_sim.state import SimState


if TYPE_CHECKING:
    from torch_sim.models.interface import ModelInterface
    from torch_sim.optimizers.cell_filters import CellFilter, CellFilterFuncs

# ... (lines 34-263 omitted)
def lbfgs_step(  # noqa: PLR0915, C901
    state: "LBFGSState | CellLBFGSState",
    model: "ModelInterface",
    *,
    max_history: int = 20,
    max_step: float | torch.Tensor = 0.2,
    curvature_eps: float = 1e-12,
) -> "LBFGSState | CellLBFGSState":
    ...  # (lines 272-559 omitted)
    # Update cell forces for next step: [S, 3, 3]
    if isinstance(state, CellLBFGSState):
        compute_cell_forces(model_output, state)

    # Update state
    state.set_constrained_forces(new_forces)  # [N, 3]
    state.energy = new_energy  # [S]
    state.stress = new_stress  # [S, 3, 3] or None

    # Build new (s, y) for history in per-system format [S, M_ext, 3] or [S, M, 3]
    # s = position difference, y = gradient difference
    if isinstance(state, CellLBFGSState):
        # Get new scaled forces and fractional positions for history
        new_deform_grad = deform_grad(
            state.reference_cell.mT, state.row_vector_cell
        )  # [S, 3, 3]
        # new_forces: [N, 3] -> new_forces_scaled: [N, 3]
        new_forces_scaled = torch.bmm(
            new_forces.unsqueeze(1),  # [N, 1, 3]
            new_deform_grad[state.system_idx],  # [N, 3, 3]
        ).squeeze(1)  # [N, 3]
        # positions: [N, 3] -> new_frac_positions: [N, 3]
        new_frac_positions = torch.linalg.solve(
            new_deform_grad[state.system_idx],  # [N, 3, 3]
            state.positions.unsqueeze(-1),  # [N, 3, 1]
        ).squeeze(-1)  # [N, 3]

        # s_new_pos = frac_pos_new - frac_pos_old: [N, 3] -> [S, M, 3]
        s_new_pos_atoms = new_frac_positions - state.prev_positions  # [N, 3]
        s_new_pos = _atoms_to_padded(
            s_new_pos_atoms, state.system_idx, n_systems, max_atoms
        )  # [S, M, 3]
        # s_new_cell = cell_pos_new - cell_pos_old: [S, 3, 3]
        s_new_cell = state.cell_positions - state.prev_cell_positions  # [S, 3, 3]
        # Concatenate to extended format: [S, M_ext, 3]
        s_new = torch.cat([s_new_pos, s_new_cell], dim=1)  # [S, M_ext, 3]

        # y_new = grad_diff for positions and cell (gradient = -forces)
        # y = grad_new - grad_old = -forces_new - (-forces_old) = forces_old - forces_new
        y_new_pos_atoms = -new_forces_scaled - (-state.prev_forces)  # [N, 3]
        y_new_pos = _atoms_to_padded(
            y_new_pos_atoms, state.system_idx, n_systems, max_atoms
        )  # [S, M, 3]
        y_new_cell = -state.cell_forces - (-state.prev_cell_forces)  # [S, 3, 3]
        y_new = torch.cat([y_new_pos, y_new_cell], dim=1)  # [S, M_ext, 3]
    else:
        # s_new = pos_new - pos_old: [N, 3] -> [S, M, 3]
        s_new_atoms = state.positions - state.prev_positions  # [N, 3]
        s_new = _atoms_to_padded(
            s_new_atoms, state.system_idx, n_systems, max_atoms
        )  # [S, M, 3]
        # y_new = grad_diff: [N, 3] -> [S, M, 3]
        y_new_atoms = -new_forces - (-state.prev_forces)  # [N, 3]
        y_new = _atoms_to_padded(
            y_new_atoms, state.system_idx, n_systems, max_atoms
        )  # [S, M, 3]

    # Append history and trim if needed
    # Note: ASE's L-BFGS doesn't have a curvature check for adding to history.
    # Invalid curvatures are handled in the two-loop by checking rho.
    # History tensors: [S, H, M_ext, 3] or [S, H, M, 3]
    cur_history_len = state.s_history.shape[1]  # H
    if cur_history_len == 0:
        # First entry: [S, 1, M_ext, 3] or [S, 1, M, 3]
        s_hist = s_new.unsqueeze(1)  # [S, 1, M_ext, 3]
        y_hist = y_new.unsqueeze(1)  # [S, 1, M_ext, 3]
    else:
        # Append new entry: [S, H, ...] cat [S, 1, ...] -> [S, H+1, ...]
        s_hist = torch.cat([state.s_history, s_new.unsqueeze(1)], dim=1)
        y_hist = torch.cat([state.y_history, y_new.unsqueeze(1)], dim=1)
    # Trim to max_history
    if s_hist.shape[1] > max_history:
        s_hist = s_hist[:, -max_history:]  # [S, max_history, ...]
        y_hist = y_hist[:, -max_history:]

    if isinstance(state, CellLBFGSState):
        # Store fractional/scaled for next iteration
        state.prev_positions = new_frac_positions.clone()  # [N, 3] (fractional)
        state.prev_forces = new_forces_scaled.clone()  # [N, 3] (scaled)
    else:
        state.prev_forces = new_forces.clone()  # [N, 3]
        state.prev_positions = state.positions.clone()  # [N, 3]

    state.s_history = s_hist  # [S, H, M_ext, 3] or [S, H, M, 3]
    state.y_history = y_hist  # [S, H, M_ext, 3] or [S, H, M, 3]
    state.n_iter = state.n_iter + 1  # [S]

    return state
