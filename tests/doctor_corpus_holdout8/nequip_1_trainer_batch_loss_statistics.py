# Source: https://github.com/mir-group/nequip/pull/1
#   code: nequip/train/trainer.py at d05ada87, before the pull request (Trainer.batch_step,
#   epoch_step, end_of_batch_log, end_of_epoch_log)
# Adapted: the Trainer reduced to the methods the training loop runs, with their bodies kept
#   for the loss and MAE statistics (the RMSE-of-contributions entry, file loggers, callbacks,
#   checkpoint saving, learning-rate schedulers and the model's scale/unscale wrapper are
#   left out: the model has no scale attribute); the NequIP network replaced by a small MLP
#   energy model over per-atom features, AtomicData batches by dicts of random tensors, the
#   Loss by an MSE on the energy with the same (loss, contributions) and mae() interface;
#   30 training and 10 validation batches, 3 epochs, Adam, cpu, seeded.
import logging
from time import perf_counter

import torch
from torch import nn

TRAIN = "training"
VALIDATION = "validation"
LOSS_KEY = "loss"
MAE_KEY = "mae"
VALUE_KEY = "value"
CONTRIB = "contrib"
ABBREV = {LOSS_KEY: "loss", MAE_KEY: "mae", "total_energy": "e"}


class EnergyModel(nn.Module):
    def __init__(self, n_features=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(),
                                 nn.Linear(128, 1))

    def forward(self, data):
        atomic_energy = self.net(data["node_features"]).squeeze(-1)
        return dict(data, total_energy=atomic_energy.sum(-1))


class Loss:
    def __init__(self, coeffs):
        self.coeffs = coeffs

    def __call__(self, pred, ref):
        loss_contrib = {key: {key: nn.functional.mse_loss(pred[key], ref[key])} for key in self.coeffs}
        loss = sum(self.coeffs[key] * loss_contrib[key][key] for key in self.coeffs)
        return loss, loss_contrib

    def mae(self, pred, ref):
        mae_contrib = {key: {key: (pred[key] - ref[key]).abs().mean()} for key in self.coeffs}
        mae = sum(mae_contrib[key][key] for key in self.coeffs)
        return mae, mae_contrib


class Trainer:
    def __init__(self, model, dl_train, dl_val, max_epochs=3, learning_rate=1e-3):
        self.model = model
        self.dl_train = dl_train
        self.dl_val = dl_val
        self.n_train_batches = len(dl_train)
        self.n_val_batches = len(dl_val)
        self.max_epochs = max_epochs
        self.loss = Loss({"total_energy": 1.0})
        self.optim = torch.optim.Adam(self.model.parameters(), lr=learning_rate)
        self.statistics = {}
        self.logger = logging.getLogger("nequip")

    def train(self):
        self.wall = perf_counter()
        self.iepoch = 0
        while self.iepoch < self.max_epochs:
            self.epoch_step()
            self.iepoch += 1

    def batch_step(self, data, n_batches, validation=False):

        self.model.train()

        out = self.model(data)

        loss, loss_contrib = self.loss(pred=out, ref=data)

        if not validation:

            self.optim.zero_grad()
            loss.backward()
            self.optim.step()

        mae, mae_contrib = self.loss.mae(pred=out, ref=data)

        self.batch_loss = loss
        self.batch_loss_contrib = loss_contrib
        self.batch_mae = mae
        self.batch_mae_contrib = mae_contrib

        self.end_of_batch_log(validation)

    def epoch_step(self):

        for self.ibatch, batch in enumerate(self.dl_train):
            self.batch_step(
                data=batch,
                n_batches=self.n_train_batches,
                validation=False,
            )

        for self.ibatch, batch in enumerate(self.dl_val):
            self.batch_step(data=batch, n_batches=self.n_val_batches, validation=True)

        self.end_of_epoch_log()

    def end_of_batch_log(self, validation: bool):
        category = VALIDATION if validation else TRAIN

        if self.ibatch == 0:
            stat = {
                MAE_KEY: {VALUE_KEY: [], CONTRIB: {}},
                LOSS_KEY: {VALUE_KEY: [], CONTRIB: {}},
            }
            for key, d in self.batch_mae_contrib.items():
                for attr, value in d.items():
                    store_key = f"{key}_{ABBREV.get(attr, attr)}" if key != attr else f"{key}"
                    for name, d_cat in stat.items():
                        d_cat[CONTRIB][store_key] = []
            self.statistics[category] = stat
        else:
            stat = self.statistics[category]

        mat_str = f"  {self.iepoch+1:5d} {self.ibatch+1:5d}"
        for combo in [
            (MAE_KEY, self.batch_mae, self.batch_mae_contrib),
            (LOSS_KEY, self.batch_loss, self.batch_loss_contrib),
        ]:
            name, value, contrib = combo

            if name == LOSS_KEY:

                stat[name][VALUE_KEY] += [value]
                mat_str += f" {value:8.3f}"

            for key, d in contrib.items():
                for attr, value in d.items():
                    store_key = f"{key}" if key == attr else f"{key}_{ABBREV.get(attr, attr)}"
                    value = value.item()
                    stat[name][CONTRIB][store_key] += [value]
                    mat_str += f" {value:8.3f}"
        self.logger.debug(mat_str)

    def end_of_epoch_log(self):
        lr = self.optim.param_groups[0]["lr"]
        wall = perf_counter() - self.wall
        self.mae_dict = dict(LR=lr, epoch=self.iepoch, wall=wall)
        mat_str = f"{self.iepoch+1:7d} {wall:8.3f} {lr:8.3g}"
        for category in [TRAIN, VALIDATION]:
            stats = self.statistics[category]
            for name, stat in stats.items():
                if name == LOSS_KEY:
                    arr = torch.as_tensor(stat[VALUE_KEY])
                    mean = arr.mean().item()
                    mat_str += f" {mean:8.3f} {arr.std().item():8.3f}"
                    self.mae_dict[f"{category}_{ABBREV.get(name, name)}"] = mean
                for key in stat[CONTRIB]:
                    mean = torch.as_tensor(stat[CONTRIB][key]).mean().item()
                    mat_str += f" {mean:8.3f}"
        print(mat_str)


def make_batch(n_structures=16, n_atoms=24, n_features=32):
    return {"node_features": torch.randn(n_structures, n_atoms, n_features),
            "total_energy": torch.randn(n_structures)}


torch.manual_seed(0)
trainer = Trainer(EnergyModel(), [make_batch() for _ in range(30)], [make_batch() for _ in range(10)])
trainer.train()
