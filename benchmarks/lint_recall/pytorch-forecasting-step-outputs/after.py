# Source: https://github.com/sktime/pytorch-forecasting/blob/9b4c36305939355ee0b7d7a005657663730ac62f/pytorch_forecasting/models/base/_base_model.py
# Adapted excerpt, after the fix https://github.com/sktime/pytorch-forecasting/commit/9b4c36305939355ee0b7d7a005657663730ac62f
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
# ... (lines 24-49 omitted)
from pytorch_forecasting.utils import (
    InitialParameterRepresenterMixIn,
    OutputMixIn,
    TupleOutputMixIn,
    apply_to_list,
    concat_sequences,
    create_mask,
    detach,
    get_embedding_size,
    groupby_apply,
    move_to_device,
    to_list,
)
# ... (lines 63-423 omitted)
class BaseModel(InitialParameterRepresenterMixIn, LightningModule, TupleOutputMixIn):
    ...  # (lines 425-720 omitted)
    def training_step(self, batch, batch_idx):
        """
        Train on batch.
        """
        x, y = batch
        log, out = self.step(x, y, batch_idx)
        self.training_step_outputs.append(detach(log))
        return log

    def on_train_epoch_end(self):
        self.on_epoch_end(self.training_step_outputs)
        self.training_step_outputs.clear()

    def predict_step(self, batch, batch_idx):
        predict_callback = [
            c for c in self.trainer.callbacks if isinstance(c, PredictCallback)
        ][0]
        x, y = batch
        _, out = self.step(x, y, batch_idx, **predict_callback.predict_kwargs)
        return out  # need to return output to be able to use predict callback

    def validation_step(self, batch, batch_idx):
        x, y = batch
        log, out = self.step(x, y, batch_idx)
        log.update(self.create_log(x, y, out, batch_idx))
        self.validation_step_outputs.append(detach(log))
        return log

    def on_validation_epoch_end(self):
        self.on_epoch_end(self.validation_step_outputs)
        self.validation_step_outputs.clear()

    def test_step(self, batch, batch_idx):
        x, y = batch
        log, out = self.step(x, y, batch_idx)
        log.update(self.create_log(x, y, out, batch_idx))
        self.testing_step_outputs.append(detach(log))
        return log

    def on_test_epoch_end(self):
        self.on_epoch_end(self.testing_step_outputs)
        self.testing_step_outputs.clear()
    # ... (lines 763-813 omitted)
    def step(
        self,
        x: dict[str, torch.Tensor],
        y: tuple[torch.Tensor, torch.Tensor],
        batch_idx: int,
        **kwargs,
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        ...  # (lines 821-860 omitted)
        if self.training and len(self.hparams.monotone_constraints) > 0:
            ...  # (lines 862-919 omitted)
        else:
            out = self(x, **kwargs)

            # calculate loss
            prediction = out["prediction"]
            if not self.predicting:
                if isinstance(self.loss, (MASE, MultiLoss)):
                    mase_kwargs = dict(
                        encoder_target=x["encoder_target"],
                        encoder_lengths=x["encoder_lengths"],
                    )
                    loss = self.loss(prediction, y, **mase_kwargs)
                else:
                    loss = self.loss(prediction, y)
            else:
                loss = None
        # ensure that loss has require_grad
        if loss is not None and loss.device.type == "mps":
            loss.requires_grad_(True)
        self.log(
            f"{self.current_stage}_loss",
            detach(loss),
            on_step=self.training,
            on_epoch=True,
            prog_bar=True,
            batch_size=len(x["decoder_target"]),
        )
        log = {"loss": loss, "n_samples": x["decoder_lengths"].size(0)}
        return log, out
