# Source: https://github.com/sktime/pytorch-forecasting/blob/17c51ba909c7c89ba9eb0d2ce00eb5cae2ecb833/pytorch_forecasting/callbacks/predict.py
# Adapted excerpt, before the fix https://github.com/sktime/pytorch-forecasting/commit/af9b14f34cacd3ad37ded9034f6d3f66db9aee6c
# (trimmed to the code the fix touches; omitted lines are marked).
from typing import Any, Optional
from warnings import warn

from lightning import Trainer
from lightning.pytorch import LightningModule
from lightning.pytorch.callbacks import BasePredictionWriter
import torch
# ... (lines 8-9 omitted)
class PredictCallback(BasePredictionWriter):
    ...  # (lines 11-40 omitted)
    def _reset_data(self, result: bool = True):
        """Clear collected data for a new prediction run."""
        self.predictions = []
        self.info = {key: [] for key in self.return_info}
        if result:
            self._result = None

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ):
        """Process and store predictions for a single batch."""
        x, y = batch

        if self.mode == "raw":
            processed_output = outputs
        elif self.mode == "prediction":
            processed_output = pl_module.to_prediction(outputs, **self.mode_kwargs)
        elif self.mode == "quantiles":
            processed_output = pl_module.to_quantiles(outputs, **self.mode_kwargs)
        else:
            raise ValueError(f"Invalid prediction mode: {self.mode}")

        self.predictions.append(processed_output)

        for key in self.return_info:
            if key == "x":
                self.info[key].append(x)
            elif key == "y":
                self.info[key].append(y[0])
            elif key == "index":
                self.info[key].append(y[1])
            elif key == "decoder_lengths":
                self.info[key].append(x["decoder_lengths"])
            else:
                warn(f"Unknown return_info key: {key}")
