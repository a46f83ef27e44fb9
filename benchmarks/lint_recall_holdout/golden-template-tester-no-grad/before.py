# Source: https://github.com/amjltc295/pytorch-golden-template/blob/7221f6497b91324de90bbe84939ff1b18088c41a/src/worker/tester.py
# Adapted excerpt, before the fix https://github.com/amjltc295/pytorch-golden-template/commit/023b9c351b36055cbab25d3cda051ba317495fb4
# (trimmed to the code the fix touches; omitted lines are marked).
import os
import time
import numpy as np

import torch

from .worker_template import WorkerTemplate
from data_loader.base_data_loader import BaseDataLoader
from pipeline.base_pipeline import BasePipeline
from utils.global_config import global_config
from utils.logging_config import logger


class Tester(WorkerTemplate):
    """
    Tester class

    Note:
        Inherited from WorkerTemplate.
    """
    def __init__(self, pipeline: BasePipeline, test_data_loader: BaseDataLoader):
        super().__init__(pipeline=pipeline, data_loader=test_data_loader, step=0)
        for attr_name in ['saving_dir']:
            setattr(self, attr_name, getattr(pipeline, attr_name))

    @property
    def enable_grad(self):
        return False

    def _run_and_optimize_model(self, data):
        model_output = self.model(data)
        return model_output, None

    def _setup_model(self):
        self.model.eval()

    def _to_log(self, epoch_stats):
        return {}

    def _init_output(self):
        """ Initialize a dictioary structure to save inferenced results. """
        return {
            'epoch_start_time': time.time(),
            'saved': {k: [] for k in global_config.saved_keys}
        }

    ...  # (lines 47-88 omitted)
