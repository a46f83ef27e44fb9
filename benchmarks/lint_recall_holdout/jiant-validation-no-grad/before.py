# Source: https://github.com/nyu-mll/jiant/blob/298e961b89a960dd924768a06114d4a76182c2b7/src/trainer.py
# Adapted excerpt, before the fix https://github.com/nyu-mll/jiant/commit/656751e7e8d0856530a0b9015a033578c5542c67
# (trimmed to the code the fix touches; omitted lines are marked).
""" Trainer """
import copy
import glob
import itertools
import logging as log
import math
import os
import random
import re
import time

import numpy as np
import torch
from allennlp.common import Params  # pylint: disable=import-error
from allennlp.common.checks import ConfigurationError  # pylint: disable=import-error
from allennlp.data.iterators import BasicIterator, BucketIterator  # pylint: disable=import-error
from allennlp.nn.util import device_mapping, move_to_device
from allennlp.training.learning_rate_schedulers import (  # pylint: disable=import-error
    LearningRateScheduler,
)
from allennlp.training.optimizers import Optimizer  # pylint: disable=import-error
from tensorboardX import SummaryWriter  # pylint: disable=import-error
from torch.nn.utils.clip_grad import clip_grad_norm_
from torch.optim.lr_scheduler import ReduceLROnPlateau

from .evaluate import evaluate
from .utils import config
from .utils.utils import assert_for_log  # pylint: disable=import-error
# ... (lines 29-161 omitted)
class SamplingMultiTaskTrainer:
    ...  # (lines 163-784 omitted)
    def _calculate_validation_performance(
        self, task, task_infos, tasks, batch_size, all_val_metrics, n_examples_overall
    ):
        """
        Builds validation generator, evaluates on each task and produces validation metrics.

        Parameters
        ----------
        task: current task to get validation performance of
        task_infos: Instance of information about the task (see _setup_training for definition)
        tasks: list of task objects to train on
        batch_size: int, batch size to use for the tasks
        all_val_metrics: dictionary. storing the validation performance
        n_examples_overall = int, current number of examples the model is validated on

        Returns
        -------
        n_examples_overall: int, current number of examples
        task_infos: updated Instance with reset training progress
        all_val_metrics: dictinary updated with micro and macro average validation performance
        """
        n_examples, batch_num = 0, 0
        task_info = task_infos[task.name]
        # to speed up training, we evaluate on a subset of validation data
        if self._val_data_limit >= 0:
            max_data_points = min(task.n_val_examples, self._val_data_limit)
        else:
            max_data_points = task.n_val_examples
        val_generator = BasicIterator(batch_size, instances_per_epoch=max_data_points)(
            task.val_data, num_epochs=1, shuffle=False
        )
        val_generator = move_to_device(val_generator, self._cuda_device)
        n_val_batches = math.ceil(max_data_points / batch_size)
        all_val_metrics["%s_loss" % task.name] = 0.0

        for batch in val_generator:
            batch_num += 1
            out = self._forward(batch, task=task)
            loss = out["loss"]
            all_val_metrics["%s_loss" % task.name] += loss.data.cpu().numpy()
            n_examples += out["n_exs"]

            # log
            if time.time() - task_info["last_log"] > self._log_interval:
                task_metrics = task.get_metrics()
                task_metrics["%s_loss" % task.name] = (
                    all_val_metrics["%s_loss" % task.name] / batch_num
                )
                description = self._description_from_metrics(task_metrics)
                log.info(
                    "Evaluate: task %s, batch %d (%d): %s",
                    task.name,
                    batch_num,
                    n_val_batches,
                    description,
                )
                task_info["last_log"] = time.time()
        assert batch_num == n_val_batches

        # Get task validation metrics and store in all_val_metrics
        task_metrics = task.get_metrics(reset=True)
        for name, value in task_metrics.items():
            all_val_metrics["%s_%s" % (task.name, name)] = value
        all_val_metrics["%s_loss" % task.name] /= batch_num  # n_val_batches
        if task.val_metric_decreases and len(tasks) > 1:
            all_val_metrics["micro_avg"] += (
                1 - all_val_metrics[task.val_metric] / self._dec_val_scale
            ) * n_examples
            all_val_metrics["macro_avg"] += (
                1 - all_val_metrics[task.val_metric] / self._dec_val_scale
            )
        else:
            # triggers for single-task cases and during MTL when task val metric increases
            all_val_metrics["micro_avg"] += all_val_metrics[task.val_metric] * n_examples
            all_val_metrics["macro_avg"] += all_val_metrics[task.val_metric]
        n_examples_overall += n_examples

        # Reset training progress
        task_info["n_batches_since_val"] = 0
        task_info["loss"] = 0
        all_val_metrics["micro_avg"] /= n_examples_overall
        all_val_metrics["macro_avg"] /= len(tasks)
        return n_examples_overall, task_infos, all_val_metrics
    def _validate(self, epoch, tasks, batch_size, periodic_save=True):
        ...  # (lines 870-887 omitted)
        task_infos, metric_infos = self._task_infos, self._metric_infos
        g_scheduler = self._g_scheduler
        self._model.eval()
        all_val_metrics = {("%s_loss" % task.name): 0.0 for task in tasks}
        all_val_metrics["macro_avg"] = 0.0
        all_val_metrics["micro_avg"] = 0.0
        n_examples_overall = 0.0

        # Get validation numbers for each task
        for task in tasks:
            n_examples_overall, task_infos, all_val_metrics = self._calculate_validation_performance(  # noqa
                task, task_infos, tasks, batch_size, all_val_metrics, n_examples_overall
            )
    ...  # (lines 901-1008 omitted)
    def _forward(self, batch, task=None):
        tensor_batch = move_to_device(batch, self._cuda_device)
        model_out = self._model.forward(task, tensor_batch)
        return model_out
    ...  # (lines 1013-1287 omitted)
