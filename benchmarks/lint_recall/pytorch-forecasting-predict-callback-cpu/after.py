# Source: https://github.com/sktime/pytorch-forecasting/blob/af9b14f34cacd3ad37ded9034f6d3f66db9aee6c/pytorch_forecasting/callbacks/predict.py
# Adapted excerpt, after the fix https://github.com/sktime/pytorch-forecasting/commit/af9b14f34cacd3ad37ded9034f6d3f66db9aee6c
# (trimmed to the code the fix touches; omitted lines are marked).
from typing import Any, Optional
from warnings import warn

from lightning import Trainer
from lightning.pytorch import LightningModule
from lightning.pytorch.callbacks import BasePredictionWriter
import torch

from pytorch_forecasting.utils import detach, move_to_device
# ... (lines 10-11 omitted)
class PredictCallback(BasePredictionWriter):
    ...  # (lines 13-42 omitted)
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

        self.predictions.append(move_to_device(detach(processed_output), "cpu"))

        # Only pay the detach+copy cost if x or decoder_lengths are actually requested
        needs_x = any(k in ("x", "decoder_lengths") for k in self.return_info)
        x_cpu = move_to_device(detach(x), "cpu") if needs_x else None

        for key in self.return_info:
            if key == "x":
                self.info[key].append(x_cpu)
            elif key == "y":
                y_cpu = move_to_device(detach(y[0]), "cpu")
                self.info[key].append(y_cpu)
            elif key == "index":
                index_cpu = move_to_device(detach(y[1]), "cpu")
                self.info[key].append(index_cpu)
            elif key == "decoder_lengths":
                self.info[key].append(x_cpu["decoder_lengths"])
            else:
                warn(f"Unknown return_info key: {key}")
