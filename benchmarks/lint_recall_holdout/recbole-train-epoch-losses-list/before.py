# Source: https://github.com/RUCAIBox/RecBole/blob/f681a5fe6ae111c20536a912a173ffd4290fb155/recbox/trainer/trainer.py
# Adapted excerpt, before the fix https://github.com/RUCAIBox/RecBole/commit/f8d87147f7a971901bd6d4d19ddf07af34f76db5
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-9 omitted)
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
# ... (lines 24-37 omitted)
class Trainer(AbstractTrainer):
    ...  # (lines 39-87 omitted)
    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        losses_list = []
        for batch_idx, interaction in enumerate(train_data):
            interaction = interaction.to(self.device)
            self.optimizer.zero_grad()
            losses = self.model.calculate_loss(interaction)
            loss = sum(losses) if isinstance(losses, tuple) else losses
            self._check_nan(loss)
            loss.backward()
            self.optimizer.step()
            losses_list.append(losses)
        if isinstance(losses_list[0], tuple):
            total_losses = []
            for j in range(len(losses_list[0])):
                total_losses.append(sum([losses[j] for losses in losses_list]).item())
            return tuple(total_losses)

        else:
            return sum(losses_list).item()
# ... (lines 108-400 omitted)
