# Source: https://github.com/IBM/mi-prometheus/blob/0cfa852df526e15113605671ff494ac6cc9429bd/miprometheus/workers/worker.py
# Adapted excerpt, before the fix https://github.com/IBM/mi-prometheus/commit/d585f9a2d55dce4c74448728e11b6104e64246e8
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-27 omitted)
import os
import yaml

import torch
import logging
import logging.config
import argparse
import numpy as np
from random import randrange
from abc import abstractmethod

from torch.utils.data import DataLoader
from miprometheus.utils.sampler_factory import SamplerFactory
from miprometheus.problems.problem_factory import ProblemFactory

# Import utils.
from miprometheus.utils.app_state import AppState
from miprometheus.utils.param_interface import ParamInterface
class Worker(object):
    ...  # (lines 49-575 omitted)
    def predict_evaluate_collect(self, model, problem, data_dict, stat_col, episode, epoch=None):
        """
        Function that performs the following:

            - passes samples through the model,
            - computes loss using the problem
            - collects problem and model statistics,


        :param model: trainable model.
        :type model: ``models.model.Model`` or a subclass

        :param problem: problem generating samples.
        :type problem: ``problems.problem.problem`` or a subclass

        :param data_dict: contains the batch of samples to pass to the model.
        :type data_dict: ``DataDict``

        :param stat_col: statistics collector used for logging accuracy etc.
        :type stat_col: ``StatisticsCollector``

        :param episode: current episode index
        :type episode: int

        :param epoch: current epoch index.
        :type epoch: int, optional


        :return:

            - logits,
            - loss


        """
        # Convert to CUDA.
        if self.app_state.use_CUDA:
            data_dict = data_dict.cuda()

        # Perform forward calculation.
        logits = model(data_dict)

        # Evaluate loss function.
        loss = problem.evaluate_loss(data_dict, logits)

        # Collect "elementary" statistics - episode and loss.
        if ('epoch' in stat_col) and (epoch is not None):
            stat_col['epoch'] = epoch

        stat_col['episode'] = episode
        # Collect loss as float.
        stat_col['loss'] = loss

        # Collect other (potential) statistics from problem & model.
        problem.collect_statistics(stat_col, data_dict, logits)
        model.collect_statistics(stat_col, data_dict, logits)

        # Return tuple: logits, loss.
        return logits, loss
    ...  # (lines 635-736 omitted)
