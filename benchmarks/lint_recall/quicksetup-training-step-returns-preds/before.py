# Source: https://github.com/HelmholtzAI-Consultants-Munich/Quicksetup-ai/blob/d5d8af4996a826a66553400ded7ca8c6e0cb253a/{{cookiecutter.project_name}}/src/{{cookiecutter.project_slug}}/models/mnist_module.py
# Adapted excerpt, before the fix https://github.com/HelmholtzAI-Consultants-Munich/Quicksetup-ai/commit/089cca473f28bb16f2c0422955815755b06f2f5c
# (trimmed to the code the fix touches; omitted lines are marked).
from typing import Any, List

import torch
from pytorch_lightning import LightningModule
from torchmetrics import MaxMetric
from torchmetrics.classification.accuracy import Accuracy
# ... (lines 7-9 omitted)
class MNISTLitModule(LightningModule):
    ...  # (lines 11-50 omitted)
    def forward(self, x: torch.Tensor):
        return self.net(x)

    def step(self, batch: Any):
        x, y = batch
        logits = self.forward(x)
        loss = self.criterion(logits, y)
        preds = torch.argmax(logits, dim=1)
        return loss, preds, y

    def training_step(self, batch: Any, batch_idx: int):
        loss, preds, targets = self.step(batch)

        # log train metrics
        acc = self.train_acc(preds, targets)
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=False)
        self.log("train/acc", acc, on_step=False, on_epoch=True, prog_bar=True)

        # we can return here dict with any tensors
        # and then read it in some callback or in `training_epoch_end()`` below
        # remember to always return loss from `training_step()` or else backpropagation will fail!
        return {"loss": loss, "preds": preds, "targets": targets}

    def training_epoch_end(self, outputs: List[Any]):
        # `outputs` is a list of dicts returned from `training_step()`
        pass
