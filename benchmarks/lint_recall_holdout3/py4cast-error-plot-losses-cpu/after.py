# Source: https://github.com/meteofrance/py4cast/blob/077a90460872d90d1ee066effe76fb73c5621abc/py4cast/observer.py
# Adapted excerpt, after the fix https://github.com/meteofrance/py4cast/commit/077a90460872d90d1ee066effe76fb73c5621abc
# (trimmed to the code the fix touches; omitted lines are marked).
from abc import ABC, abstractmethod
from collections import defaultdict
from copy import deepcopy
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Union

import einops
import matplotlib.pyplot as plt
import torch
from PIL import Image
from pytorch_lightning.strategies import (  # Use for homogeneity in gathering operation for plot.
    ParallelStrategy,
    SingleDeviceStrategy,
)

if TYPE_CHECKING:
    from py4cast.lightning import AutoRegressiveLightning

from py4cast.datasets.base import NamedTensor
from py4cast.losses import Py4CastLoss
from py4cast.plots import plot_error_map, plot_prediction, plot_spatial_error


def gather(
    obj: "AutoRegressiveLightning", tensor_to_gather: torch.Tensor
) -> torch.Tensor:
    """
    Send a tensor with the same dimension whether we are in Paralll or SingleDevice strategy.
    Be careful if you are doing something else than plotting results.
    """
    if isinstance(obj.trainer.strategy, SingleDeviceStrategy):
        loss_tensor = obj.trainer.strategy.all_gather(tensor_to_gather)
    elif isinstance(obj.trainer.strategy, ParallelStrategy):
        loss_tensor = obj.trainer.strategy.all_gather(tensor_to_gather).flatten(0, 1)
    else:
        raise TypeError(
            f"Unknwon type {obj.trainer.strategy}. Know {SingleDeviceStrategy} and {ParallelStrategy}"
        )

    return loss_tensor


class ErrorObserver(ABC):
    """
    Abstract class to observe Errors between prediction and target.
    Prediction and target had already been computed.
    """

    @abstractmethod
    def update(
        self,
        obj: "AutoRegressiveLightning",
        prediction: NamedTensor,
        target: NamedTensor,
    ) -> None:
        """
        Do an action when "step" is trigger
        """
        pass

    @abstractmethod
    def on_step_end(self, obj: "AutoRegressiveLightning", label: str = "") -> None:
        """
        Do an action when "end" is trigger
        """
        pass

# ... (lines 68-297 omitted)
class StateErrorPlot(ErrorObserver):
    """
    Produce a figure where the error for each variable is shown
    with respect to step
    """

    def __init__(
        self,
        metrics: Dict[str, Py4CastLoss],
        prefix: str = "Test",
        save_path: Path = None,
    ):
        self.metrics = metrics
        self.prefix = prefix
        self.losses = {}
        self.shortnames = []
        self.units = []
        self.initialized = False
        self.save_path = save_path
        for metric in self.metrics:
            self.losses[metric] = []

    def update(
        self,
        obj: "AutoRegressiveLightning",
        prediction: NamedTensor,
        target: NamedTensor,
    ) -> None:
        """
        Compute the metric. Append to a dictionnary
        """
        for name in self.metrics:
            self.losses[name].append(self.metrics[name](prediction, target).cpu())
        if not self.initialized:
            self.shortnames = prediction.feature_names
            self.units = [
                obj.hparams["hparams"].dataset_info.units[name]
                for name in prediction.feature_names
            ]
            self.initialized = True

    def on_step_end(self, obj: "AutoRegressiveLightning", label: str = "") -> None:
        """
        Make the summary figure
        """
        tensorboard = obj.logger.experiment
        for name in self.metrics:
            loss_tensor = gather(obj, torch.cat(self.losses[name], dim=0))
            if obj.trainer.is_global_zero:
                loss = torch.mean(loss_tensor, dim=0)

                # Log metrics in tensorboard, with x axis as forecast timestep
                for t in range(loss.shape[0]):
                    for k in range(loss.shape[1]):
                        scalar_name = f"{label}_{name}/timestep_{self.shortnames[k]}"
                        tensorboard.add_scalar(scalar_name, loss[t][k], t + 1)

                ...  # (lines 355-371 omitted)
        # Free memory
        [self.losses[name].clear() for name in self.metrics]


class SpatialErrorPlot(ErrorObserver):
    """
    Produce a map which shows where the error are accumulating (all variables together).
    """

    def __init__(self, prefix: str = "Test"):
        self.spatial_loss_maps = []
        self.prefix = prefix

    def update(
        self,
        obj: "AutoRegressiveLightning",
        prediction: NamedTensor,
        target: NamedTensor,
    ) -> None:
        spatial_loss = obj.loss(prediction, target, reduce_spatial_dim=False).cpu()
        # Getting only spatial loss for the required val_step_errors
        if prediction.num_spatial_dims == 1:
            spatial_loss = einops.rearrange(
                spatial_loss, "b t (x y) -> b t x y ", x=obj.grid_shape[0]
            )
        self.spatial_loss_maps.append(spatial_loss)  # (B, N_log, N_lat, N_lon)

    def on_step_end(self, obj: "AutoRegressiveLightning", label: str = "") -> None:
        """
        Make the summary figure
        """
        spatial_loss_tensor = gather(
            obj, torch.cat(self.spatial_loss_maps, dim=0)
        )  # (N_test, N_log, N_lat, N_lon)

        if obj.trainer.is_global_zero:
            mean_spatial_loss = torch.mean(
                spatial_loss_tensor, dim=0
            )  # (N_log, N_lat, N_lon)
            loss_map_figs = [
                plot_spatial_error(
                    loss_map,
                    obj.interior_2d[:, :, 0],
                    title=f"{self.prefix} loss, t={t_i} ({obj.hparams['hparams'].dataset_info.step_duration*t_i} h)",
                    domain_info=obj.hparams["hparams"].dataset_info.domain_info,
                )
                for t_i, loss_map in enumerate(mean_spatial_loss)
            ]
            tensorboard = obj.logger.experiment
            for t_i, fig in enumerate(loss_map_figs):
                tensorboard.add_figure(
                    f"spatial_error_{label}/{self.prefix}_loss", fig, t_i
                )
            plt.close()

        self.spatial_loss_maps.clear()
