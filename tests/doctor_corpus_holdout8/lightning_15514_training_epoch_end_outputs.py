# Source: https://github.com/Lightning-AI/pytorch-lightning/issues/15514
# Adapted: the toy example kept as posted (SomeModel, SomeDataset, the Trainer call);
#   pytorch_lightning is not installed, so `pl` is a stub with the same interface: a
#   LightningModule that is an nn.Module with log() and device, and a Trainer whose fit() runs
#   the automatic optimization loop of Lightning 1.8 (training_step, backward, step) and, as
#   Lightning does when training_epoch_end is overridden, keeps every step's output (the loss
#   detached, the other entries as returned) for the epoch and passes them to it;
#   batch_size, features 10240, 24000 -> 64, 2000; accelerator="gpu" -> "cpu", max_epochs=2
#   and limit_train_batches=30 (the dataset has 100000000 items), cpu, seeded.
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class _PL:
    class LightningModule(nn.Module):
        @property
        def device(self):
            return next(self.parameters()).device

        def log(self, name, value):
            self._logged = {name: value.detach()}

        def training_epoch_end(self, outputs):
            pass

    class Trainer:
        def __init__(self, devices=1, accelerator="cpu", check_val_every_n_epoch=1, max_epochs=2,
                     limit_train_batches=30):
            self.max_epochs = max_epochs
            self.limit_train_batches = limit_train_batches

        def fit(self, model, train_dataloaders, val_dataloaders=None):
            optimizer = model.configure_optimizers()
            keep_outputs = type(model).training_epoch_end is not _PL.LightningModule.training_epoch_end
            for epoch in range(self.max_epochs):
                epoch_outputs = []
                for batch_idx, batch in enumerate(train_dataloaders):
                    if batch_idx >= self.limit_train_batches:
                        break
                    output = model.training_step(batch, batch_idx)
                    optimizer.zero_grad()
                    output["loss"].backward()
                    optimizer.step()
                    if keep_outputs:
                        epoch_outputs.append({k: (v.detach() if k == "loss" else v) for k, v in output.items()})
                model.training_epoch_end(epoch_outputs)
                print("epoch", epoch, "done")


pl = _PL


class SomeModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(1, 2)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)

    def forward(self):
        batch_size, features = 64, 2000
        x_hat = torch.randn(batch_size, features, requires_grad=True, device=self.device)
        x = torch.randn(batch_size, features, device=self.device)
        loss = F.mse_loss(x_hat, x)
        self.log("train_loss", loss)
        return {
            "loss": loss,
            "x": x,
        }

    def training_step(self, batch, batch_idx):
        return self()

    def training_epoch_end(self, outputs) -> None:
        # do nothing
        ...


class SomeDataset(Dataset):
    def __len__(self):
        return 100000000

    def __getitem__(self, index):
        return "some sample"


torch.manual_seed(0)
train = SomeDataset()
val = SomeDataset()

model = SomeModel()
trainer = pl.Trainer(devices=1, accelerator="cpu", check_val_every_n_epoch=1, )
trainer.fit(model, DataLoader(train), DataLoader(val))
