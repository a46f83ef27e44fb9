# Source: https://github.com/sktime/pytorch-forecasting/pull/1924
#   code: pytorch_forecasting/models/base_model.py (BaseModel.training_step, step,
#   on_train_epoch_end, training_step_outputs) before the pull request
# Adapted: Lightning's Trainer replaced by a plain loop that calls the same hooks in the same
#   order (training_step, backward of the returned "loss", optimizer step, on_train_epoch_end);
#   self.log and the interpretation/plotting code dropped; the forecasting network reduced to
#   an MLP over the encoder window (encoder length 48, prediction length 12); TimeSeriesDataSet
#   replaced by random AR-like windows; 1 epoch of 60 batches of 64, cpu, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


class BaseModel(nn.Module):
    def __init__(self, max_encoder_length=48, max_prediction_length=12, hidden_size=128,
                 log_interval=-1, learning_rate=1e-3):
        super().__init__()
        self.hparams = dict(max_encoder_length=max_encoder_length,
                            max_prediction_length=max_prediction_length,
                            log_interval=log_interval, learning_rate=learning_rate)
        self.network = nn.Sequential(nn.Linear(max_encoder_length, hidden_size), nn.ReLU(),
                                     nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                                     nn.Linear(hidden_size, max_prediction_length))
        self.loss = nn.MSELoss()
        self.training_step_outputs = []
        self.validation_step_outputs = []
        self.global_step = 0
        self.current_epoch = 0

    @property
    def current_stage(self) -> str:
        return "train" if self.training else "val"

    def forward(self, x):
        prediction = self.network(x["encoder_cont"][..., 0])
        return dict(prediction=prediction)

    def training_step(self, batch, batch_idx):
        """
        Train on batch.
        """
        x, y = batch
        log, out = self.step(x, y, batch_idx)
        self.training_step_outputs.append(log)
        return log

    def on_train_epoch_end(self):
        self.on_epoch_end(self.training_step_outputs)
        self.training_step_outputs.clear()

    def step(self, x, y, batch_idx, **kwargs):
        out = self(x, **kwargs)
        prediction = out["prediction"]
        loss = self.loss(prediction, y[0])
        log = {"loss": loss, "n_samples": x["decoder_lengths"].size(0)}
        return log, out

    def on_epoch_end(self, outputs):
        n = sum(o["n_samples"] for o in outputs)
        mean = sum(o["loss"].item() * o["n_samples"] for o in outputs) / n
        print(f"epoch {self.current_epoch}: {self.current_stage}_loss {mean:.4f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams["learning_rate"])


def make_batches(n_batches, batch_size, encoder_length, prediction_length, generator):
    for _ in range(n_batches):
        t = torch.arange(encoder_length + prediction_length, dtype=torch.float32)
        phase = torch.rand(batch_size, 1, generator=generator) * 6.28
        series = torch.sin(t / 20.0 * 6.28 + phase) + 0.1 * torch.randn(
            batch_size, t.numel(), generator=generator)
        x = {"encoder_cont": series[:, :encoder_length, None],
             "decoder_lengths": torch.full((batch_size,), prediction_length)}
        y = (series[:, encoder_length:], None)
        yield x, y


def fit(model, max_epochs, batches_per_epoch, batch_size=64):
    optimizer = model.configure_optimizers()
    generator = torch.Generator().manual_seed(0)
    for epoch in range(max_epochs):
        model.current_epoch = epoch
        model.train()
        for batch_idx, batch in enumerate(make_batches(batches_per_epoch, batch_size,
                                                       model.hparams["max_encoder_length"],
                                                       model.hparams["max_prediction_length"],
                                                       generator)):
            output = model.training_step(batch, batch_idx)
            optimizer.zero_grad()
            output["loss"].backward()
            optimizer.step()
            model.global_step += 1
        model.on_train_epoch_end()


if __name__ == "__main__":
    torch.manual_seed(42)
    net = BaseModel()
    fit(net, max_epochs=1, batches_per_epoch=60)
