# Source: https://github.com/jpata/particleflow/blob/d335cd3f345be0fa4b1872edd7e9d5d85ab81812/mlpf/pyg/training.py
# Adapted excerpt, before the fix https://github.com/jpata/particleflow/commit/3b771064df38d6dbb77d173fdeb9656ac00624f6
# (trimmed to the code the fix touches; omitted lines are marked).
import os
import os.path as osp
import pickle as pkl
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Optional
import logging
import shutil
from datetime import datetime
import tqdm
import yaml

import numpy as np

# comet needs to be imported before torch
from comet_ml import OfflineExperiment, Experiment  # noqa: F401, isort:skip
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor, nn
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.tensorboard import SummaryWriter

from pyg.logger import _logger, _configLogger
from pyg.utils import (
    unpack_predictions,
    unpack_target,
    get_model_state_dict,
    load_checkpoint,
    save_checkpoint,
    CLASS_LABELS,
    X_FEATURES,
    save_HPs,
    get_lr_schedule,
)


import fastjet
from pyg.inference import make_plots, run_predictions
from pyg.mlpf import MLPF
from pyg.PFDataset import Collater, PFDataLoader, PFDataset, get_interleaved_dataloaders
from utils import create_comet_experiment
# ... (lines 45-197 omitted)
def train_and_valid(
    rank,
    world_size,
    model,
    optimizer,
    data_loader,
    is_train,
    lr_schedule=None,
    comet_experiment=None,
    comet_step_freq=None,
    epoch=None,
):
    """
    Performs training over a given epoch. Will run a validation step every N_STEPS and after the last training batch.
    """

    train_or_valid = "train" if is_train else "valid"
    _logger.info(f"Initiating epoch #{epoch} {train_or_valid} run on device rank={rank}", color="red")

    # this one will keep accumulating `train_loss` and then return the average
    epoch_loss = {}

    if is_train:
        model.train()
    else:
        model.eval()

    # only show progress bar on rank 0
    if (world_size > 1) and (rank != 0):
        iterator = enumerate(data_loader)
    else:
        iterator = tqdm.tqdm(
            enumerate(data_loader), total=len(data_loader), desc=f"Epoch {epoch} {train_or_valid} loop on rank={rank}"
        )

    for itrain, batch in iterator:
        batch = batch.to(rank, non_blocking=True)

        ygen = unpack_target(batch.ygen)

        if world_size > 1:
            conv_type = model.module.conv_type
        else:
            conv_type = model.conv_type

        batchidx_or_mask = batch.batch if conv_type == "gravnet" else batch.mask
        ypred = model(batch.X, batchidx_or_mask)
        ypred = unpack_predictions(ypred)

        if is_train:
            loss = mlpf_loss(ygen, ypred)
            for param in model.parameters():
                param.grad = None
        else:
            with torch.no_grad():
                loss = mlpf_loss(ygen, ypred)

        if is_train:
            loss["Total"].backward()
            optimizer.step()
            if lr_schedule:
                lr_schedule.step()

        for loss_ in loss.keys():
            if loss_ not in epoch_loss:
                epoch_loss[loss_] = 0.0
            epoch_loss[loss_] += loss[loss_].detach()

        if comet_experiment and is_train:
            if itrain % comet_step_freq == 0:
                # this loss is not normalized to batch size
                step = (epoch - 1) * len(data_loader) + itrain
                comet_experiment.log_metrics(loss, prefix=f"{train_or_valid}", step=step)
                comet_experiment.log_metric("learning_rate", lr_schedule.get_last_lr(), step=step)

    num_data = torch.tensor(len(data_loader), device=rank)
    # sum up the number of steps from all workers
    if world_size > 1:
        torch.distributed.all_reduce(num_data)

    for loss_ in epoch_loss:
        # sum up the losses from all workers
        if world_size > 1:
            torch.distributed.all_reduce(epoch_loss[loss_])
        epoch_loss[loss_] = epoch_loss[loss_].cpu().item() / num_data.cpu().item()

    if world_size > 1:
        dist.barrier()

    return epoch_loss
# ... (lines 288-1008 omitted)
