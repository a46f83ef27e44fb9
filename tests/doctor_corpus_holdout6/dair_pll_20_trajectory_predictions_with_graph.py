# Source: https://github.com/DAIRLab/dair_pll/pull/20
# Adapted: SupervisedLearningExperiment.trajectory_predict of dair_pll/experiment.py at the
#   parent of the pull request's commit, and the trajectory part of its final evaluation
#   (stats per set: trajectory predictions, squared errors through to_json); the experiment
#   config, the state space and the learned multibody System are stubbed with the same
#   interface (config.data_config.slice_config.t_skip, system.carry_callback(),
#   system.simulate(x_0, carry, steps) -> (states, carry)) around a small learned
#   residual dynamics network instead of the contact-implicit model; 3 sets of 40 random
#   trajectories of 60 steps of a 12-dimensional state, no Weights & Biases, cpu, seeded.
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import torch
from torch import Tensor, nn

torch.manual_seed(0)


@dataclass
class SliceConfig:
    t_skip: int = 0
    t_history: int = 1
    t_prediction: int = 1


@dataclass
class DataConfig:
    slice_config: SliceConfig = field(default_factory=SliceConfig)


@dataclass
class SupervisedLearningExperimentConfig:
    data_config: DataConfig = field(default_factory=DataConfig)


class System(nn.Module):
    def __init__(self, n_x=12, hidden=256):
        super().__init__()
        self.dynamics = nn.Sequential(nn.Linear(n_x, hidden), nn.Tanh(), nn.Linear(hidden, n_x))

    def carry_callback(self) -> Tensor:
        return torch.zeros(1)

    def simulate(self, x_0: Tensor, carry_0: Tensor, steps: int) -> Tuple[Tensor, Tensor]:
        states = [x_0[..., -1, :]]
        for _ in range(steps):
            states.append(states[-1] + 0.01 * self.dynamics(states[-1]))
        return torch.stack(states, dim=-2), carry_0


def to_json(value) -> List:
    return value.detach().tolist()


def state_square_error(x_predicted: Tensor, x_target: Tensor) -> Tensor:
    return ((x_predicted - x_target) ** 2).sum(dim=-1).mean()


class SupervisedLearningExperiment:
    def __init__(self, config: SupervisedLearningExperimentConfig):
        self.config = config

    def trajectory_predict(self, x: List[Tensor],
                           system: System) -> Tuple[List[Tensor], List[Tensor]]:
        """Predict from full lists of trajectories.

        Preloads initial conditions from the first ``t_skip + 1`` elements of
        each trajectory.
        """
        t_skip = self.config.data_config.slice_config.t_skip
        t_begin = t_skip + 1
        x_0 = [x_i[..., :t_begin, :] for x_i in x]
        targets = [x_i[..., t_begin:, :] for x_i in x]
        prediction_horizon = [x_i.shape[-2] - t_skip - 1 for x_i in x]

        assert system.carry_callback is not None
        carry_0 = system.carry_callback()
        predictions = [
            system.simulate(x_0_i, carry_0, horizon_i)[0][..., 1:, :]
            for x_0_i, horizon_i in zip(x_0, prediction_horizon)
        ]
        return predictions, targets

    def evaluate_systems_for_sets(self, sets: Dict[str, List[Tensor]],
                                  systems: Dict[str, System]) -> Dict:
        stats = {}
        for set_name, trajectories in sets.items():
            for system_name, system in systems.items():
                traj_pred, traj_target = self.trajectory_predict(
                    trajectories, system)
                trajectory_mse = torch.stack([
                    state_square_error(tp, tt)
                    for tp, tt in zip(traj_pred, traj_target)
                ])
                stats[f'{set_name}_{system_name}_trajectory_mse'] = \
                    to_json(trajectory_mse)
        return stats


if __name__ == '__main__':
    experiment = SupervisedLearningExperiment(SupervisedLearningExperimentConfig())
    sets = {name: [torch.randn(60, 12) for _ in range(40)] for name in ('train', 'valid', 'test')}
    stats = experiment.evaluate_systems_for_sets(sets, {'learned': System()})
    print({k: sum(v) / len(v) for k, v in stats.items()})
