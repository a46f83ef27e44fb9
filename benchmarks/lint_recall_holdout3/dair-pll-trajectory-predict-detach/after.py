# Source: https://github.com/DAIRLab/dair_pll/blob/a4365ae3d686ff4b0531a57e664e9acb6fbc45ac/dair_pll/experiment.py
# Adapted excerpt, after the fix https://github.com/DAIRLab/dair_pll/commit/a4365ae3d686ff4b0531a57e664e9acb6fbc45ac
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-9 omitted)
import dataclasses
import signal
import time
from abc import ABC, abstractmethod
from copy import deepcopy
from dataclasses import dataclass, field
from typing import List, Tuple, Callable, Optional, Dict, cast, Union

import numpy as np
import torch
from torch import Tensor
from torch.optim import Optimizer
from torch.utils.data import DataLoader

from dair_pll import file_utils
from dair_pll.dataset_management import ExperimentDataManager, \
    TrajectorySet
from dair_pll.experiment_config import SupervisedLearningExperimentConfig
from dair_pll.state_space import StateSpace
from dair_pll.system import System, SystemSummary
from dair_pll.wandb_manager import WeightsAndBiasesManager
# ... (lines 31-125 omitted)
class SupervisedLearningExperiment(ABC):
    ...  # (lines 127-249 omitted)
    def trajectory_predict(
            self,
            x: List[Tensor],
            system: System,
            do_detach: bool = False) -> Tuple[List[Tensor], List[Tensor]]:
        """Predict from full lists of trajectories.

        Preloads initial conditions from the first ``t_skip + 1`` elements of
        each trajectory.

        Args:
            x: List of ``(T, space.n_x)`` trajectories.
            system: System to run prediction on.
            do_detach: Whether to detach each prediction from the computation
              graph; useful for memory management for large groups of
              trajectories.

        Returns:
            List of ``(T - t_skip - 1, space.n_x)`` predicted trajectories.

            List of ``(T - t_skip - 1, space.n_x)`` target trajectories.

        """
        t_skip = self.config.data_config.slice_config.t_skip
        t_begin = t_skip + 1
        x_0 = [x_i[..., :t_begin, :] for x_i in x]
        targets = [x_i[..., t_begin:, :] for x_i in x]
        prediction_horizon = [x_i.shape[-2] - t_skip - 1 for x_i in x]

        assert system.carry_callback is not None
        carry_0 = system.carry_callback()
        predictions = []
        for x_0_i, horizon_i in zip(x_0, prediction_horizon):
            x_prediction_i, carry_i = system.simulate(x_0_i, carry_0, horizon_i)
            del carry_i
            if do_detach:
                predictions.append(x_prediction_i[..., 1:, :].detach().clone())
                del x_prediction_i
            else:
                predictions.append(x_prediction_i[..., 1:, :])
        return predictions, targets

    ...  # (lines 292-684 omitted)
    def evaluate_systems_on_sets(
            self, systems: Dict[str, System],
            sets: Dict[str, TrajectorySet]) -> StatisticsDict:
        r"""Evaluate given systems on trajectory sets.

        Builds a "statistics" dictionary containing a thorough evaluation
        each system on each set, containing the following:

            * Single step and trajectory prediction losses.
            * Squared norms of velocity and delta-velocity (for normalization).
            * Sample target and prediction trajectories.
            * Auxiliary trajectory comparisons defined in
              :meth:`dair_pll.state_space.StateSpace\
              .auxiliary_comparisons()`
            * Summary statistics of the above where applicable.

        Args:
            systems: Named dictionary of systems to evaluate.
            sets: Named dictionary of sets to evaluate.

        Returns:
            Statistics dictionary.

        Warnings:
            Currently assumes prediction horizon of 1.
        """
        # pylint: disable=too-many-locals

        stats = {}  # type: StatisticsDict
        space = self.space

        def to_json(possible_tensor: Union[float, List, Tensor]) -> \
                StatisticsValue:
            """Converts tensor to :class:`~np.ndarray`, which enables saving
            stats as json."""
            if isinstance(possible_tensor, list):
                return [to_json(value) for value in possible_tensor]
            if torch.is_tensor(possible_tensor):
                tensor = cast(Tensor, possible_tensor)
                return tensor.detach().cpu().numpy()

            assert isinstance(possible_tensor, float)
            return possible_tensor

        for set_name, trajectory_set in sets.items():
            trajectories = trajectory_set.trajectories
            n_saved_trajectories = min(MAX_SAVED_TRAJECTORIES,
                                       len(trajectories))
            slices_loader = DataLoader(trajectory_set.slices,
                                       batch_size=128,
                                       shuffle=False)
            slices = trajectory_set.slices[:]
            all_x = cast(List[Tensor], slices[0])
            all_y = cast(List[Tensor], slices[1])

            # hack: assume 1-step prediction for now
            # pylint: disable=E1103
            v_plus = [space.v(y[:1, :]) for y in all_y]
            v_minus = [space.v(x[-1:, :]) for x in all_x]
            dv2 = torch.stack([
                space.velocity_square_error(vp, vm)
                for vp, vm in zip(v_plus, v_minus)
            ])
            vp2 = torch.stack(
                [space.velocity_square_error(vp, 0 * vp) for vp in v_plus])
            stats[f'{set_name}_{DELTA_VELOCITY_SIZE}'] = to_json(dv2)
            stats[f'{set_name}_{PREDICTED_VELOCITY_SIZE}'] = to_json(vp2)

            for system_name, system in systems.items():
                model_loss_list = []
                for batch_x, batch_y in slices_loader:
                    model_loss_list.append(
                        self.prediction_loss(batch_x, batch_y, system, True))
                model_loss = torch.cat(model_loss_list)
                loss_name = f'{set_name}_{system_name}_{LOSS_NAME}'
                stats[loss_name] = to_json(model_loss)

                if system_name == LEARNED_SYSTEM_NAME:
                    trajectories = [t.unsqueeze(0) for t in trajectories]
                traj_pred, traj_target = self.trajectory_predict(
                    trajectories, system, True)
                if system_name == LEARNED_SYSTEM_NAME:
                    traj_target = [t.squeeze(0) for t in traj_target]
                    traj_pred = [t.squeeze(0) for t in traj_pred]
                    stats[f'{set_name}_{system_name}_{TARGET_NAME}'] = \
                        to_json(traj_target[:n_saved_trajectories])
                    stats[f'{set_name}_{system_name}_{PREDICTION_NAME}'] = \
                        to_json(traj_pred[:n_saved_trajectories])
                # pylint: disable=E1103
                trajectory_mse = torch.stack([
                    space.state_square_error(tp, tt)
                    for tp, tt in zip(traj_pred, traj_target)
                ])

                stats[f'{set_name}_{system_name}_{TRAJECTORY_ERROR_NAME}'] = \
                    to_json(trajectory_mse)
                aux_comps = space.auxiliary_comparisons()
                for comp_name in aux_comps:
                    stats[f'{set_name}_{system_name}_{comp_name}'] = to_json([
                        aux_comps[comp_name](tp, tt)
                        for tp, tt in zip(traj_pred, traj_target)
                    ])

        summary_stats = {}  # type: StatisticsDict
        for key, stat in stats.items():
            if isinstance(stat, np.ndarray):
                if len(stat) > 0:
                    if isinstance(stat[0], float):
                        summary_stats[f'{key}_{AVERAGE_TAG}'] = np.average(stat)

        stats.update(summary_stats)
        return stats

    ...  # (lines 798-851 omitted)
