# Source: https://github.com/RUCAIBox/RecBole/blob/f8d87147f7a971901bd6d4d19ddf07af34f76db5/recbox/trainer/trainer.py
# Adapted excerpt, after the fix https://github.com/RUCAIBox/RecBole/commit/f8d87147f7a971901bd6d4d19ddf07af34f76db5
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-9 omitted)
import sys
import os
import itertools
import torch
import torch.optim as optim
import numpy as np
import matplotlib.pyplot as plt

from time import time
from logging import getLogger

from recbox.evaluator import TopKEvaluator, LossEvaluator
from recbox.data.interaction import Interaction
from recbox.utils import ensure_dir, get_local_time, DataLoaderType, KGDataLoaderState, EvaluatorType
from recbox.trainer.utils import early_stopping, calculate_valid_score, dict2str
# ... (lines 25-38 omitted)
class Trainer(AbstractTrainer):
    ...  # (lines 40-88 omitted)
    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        total_loss = None
        for batch_idx, interaction in enumerate(train_data):
            interaction = interaction.to(self.device)
            self.optimizer.zero_grad()
            losses = self.model.calculate_loss(interaction)
            if isinstance(losses, tuple):
                loss = sum(losses)
                loss_tuple = tuple(per_loss.item() for per_loss in losses)
                total_loss = loss_tuple if total_loss is None else tuple(map(sum, zip(total_loss, loss_tuple)))
            else:
                loss = losses
                total_loss = losses.item() if total_loss is None else total_loss + losses.item()
            self._check_nan(loss)
            loss.backward()
            self.optimizer.step()
        return total_loss
# ... (lines 107-402 omitted)
