# Source: https://github.com/atomistic-machine-learning/schnetpack/pull/254
#   code: src/schnetpack/train/trainer.py (Trainer.train), train/loss.py (build_mse_loss),
#   train/metrics.py (MeanAbsoluteError), train/hooks/logging.py (LoggingHook) and the derivative
#   branch of atomistic/output_modules.py (Atomwise.forward) at 6bdd2ccd^, before the pull request
# Adapted: Trainer.train (checkpointing, best-model saving and the exception hook dropped),
#   build_mse_loss, MeanAbsoluteError and the LoggingHook's loss/metric bookkeeping kept as they
#   were, the hook printing instead of writing a csv; SchNet replaced by a small atomwise network
#   over Gaussian-expanded interatomic distances whose forces are -dE/dR taken with
#   create_graph=True as Atomwise does; the QM9/MD17 loaders by 12 training and 6 validation
#   batches of 16 random 6-atom molecules with energies and forces; 3 epochs; cpu, seeded.
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import grad


def build_mse_loss(properties, loss_tradeoff=None):
    if loss_tradeoff is None:
        loss_tradeoff = [1] * len(properties)

    def loss_fn(batch, result):
        loss = 0.0
        for prop, factor in zip(properties, loss_tradeoff):
            diff = batch[prop] - result[prop]
            diff = diff ** 2
            err_sq = factor * torch.mean(diff)
            loss += err_sq
        return loss
    return loss_fn


class MeanAbsoluteError:
    def __init__(self, target, model_output=None, name=None, element_wise=False):
        self.target, self.model_output, self.element_wise = target, model_output, element_wise
        self.name = "MAE_" + target if name is None else name
        self.l1loss = 0.0
        self.n_entries = 0.0

    def reset(self):
        self.l1loss = 0.0
        self.n_entries = 0.0

    def add_batch(self, batch, result):
        y = batch[self.target]
        yp = result[self.model_output] if self.model_output is not None else result
        diff = y - yp
        self.l1loss += torch.sum(torch.abs(diff).view(-1), 0).detach().cpu().data.numpy()
        if self.element_wise:
            self.n_entries += torch.sum(batch["_atom_mask"]).detach().cpu().data.numpy() * y.shape[-1]
        else:
            self.n_entries += np.prod(y.shape)

    def aggregate(self):
        return self.l1loss / self.n_entries


class LoggingHook:
    def __init__(self, metrics):
        self._train_loss = 0
        self._counter = 0
        self.metrics = metrics

    def on_epoch_begin(self, trainer):
        self._train_loss = 0.0
        self._counter = 0

    def on_batch_end(self, trainer, train_batch, result, loss):
        n_samples = list(result.values())[0].size(0)
        self._train_loss += float(loss.data) * n_samples
        self._counter += n_samples

    def on_validation_begin(self, trainer):
        for metric in self.metrics:
            metric.reset()

    def on_validation_batch_end(self, trainer, val_batch, val_result):
        for metric in self.metrics:
            metric.add_batch(val_batch, val_result)

    def on_validation_end(self, trainer, val_loss):
        print("epoch %d train %.4f val %.4f %s" % (trainer.epoch, self._train_loss / self._counter, val_loss,
              " ".join("%s %.4f" % (m.name, m.aggregate()) for m in self.metrics)))


class AtomwiseModel(nn.Module):
    def __init__(self, n_gaussians=16, n_hidden=64, create_graph=True):
        super().__init__()
        self.offsets = torch.linspace(0.0, 5.0, n_gaussians)
        self.out_net = nn.Sequential(nn.Linear(n_gaussians, n_hidden), nn.Tanh(), nn.Linear(n_hidden, 1))
        self.create_graph = create_graph

    def forward(self, inputs):
        R = inputs["_positions"]
        R.requires_grad_()
        dist = ((R[:, :, None, :] - R[:, None, :, :]) ** 2).sum(-1).add(1e-9).sqrt()
        f = torch.exp(-((dist[..., None] - self.offsets) ** 2) / 0.5).sum(2)
        yi = self.out_net(f)
        y = torch.sum(yi * inputs["_atom_mask"][..., None], 1)
        result = {"energy": y}
        dy = grad(result["energy"], R, grad_outputs=torch.ones_like(result["energy"]),
                  create_graph=self.create_graph, retain_graph=True)[0]
        result["forces"] = -1.0 * dy
        return result


class Trainer:
    def __init__(self, model, loss_fn, optimizer, train_loader, validation_loader, hooks=[], validation_interval=1):
        self._model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.train_loader, self.validation_loader = train_loader, validation_loader
        self.hooks, self.validation_interval = hooks, validation_interval
        self.epoch, self.step, self.best_loss, self.loss_is_normalized = 0, 0, float("inf"), True

    def train(self, device, n_epochs=sys.maxsize):
        self._model.to(device)
        for _ in range(n_epochs):
            self.epoch += 1
            for h in self.hooks:
                h.on_epoch_begin(self)
            for train_batch in self.train_loader:
                self.optimizer.zero_grad()
                train_batch = {k: v.to(device) for k, v in train_batch.items()}
                result = self._model(train_batch)
                loss = self.loss_fn(train_batch, result)
                loss.backward()
                self.optimizer.step()
                self.step += 1
                for h in self.hooks:
                    h.on_batch_end(self, train_batch, result, loss)
            if self.epoch % self.validation_interval == 0:
                for h in self.hooks:
                    h.on_validation_begin(self)
                val_loss = 0.0
                n_val = 0
                for val_batch in self.validation_loader:
                    vsize = list(val_batch.values())[0].size(0)
                    n_val += vsize
                    val_batch = {k: v.to(device) for k, v in val_batch.items()}
                    val_result = self._model(val_batch)
                    val_batch_loss = (self.loss_fn(val_batch, val_result).data.cpu().numpy())
                    if self.loss_is_normalized:
                        val_loss += val_batch_loss * vsize
                    else:
                        val_loss += val_batch_loss
                    for h in self.hooks:
                        h.on_validation_batch_end(self, val_batch, val_result)
                if self.loss_is_normalized:
                    val_loss /= n_val
                if self.best_loss > val_loss:
                    self.best_loss = val_loss
                for h in self.hooks:
                    h.on_validation_end(self, val_loss)


def make_batches(n, seed):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        R = torch.randn(16, 6, 3, generator=g) * 1.5
        batches.append({"_positions": R, "_atom_mask": torch.ones(16, 6), "energy": torch.randn(16, 1, generator=g),
                        "forces": torch.randn(16, 6, 3, generator=g)})
    return batches


torch.manual_seed(0)
model = AtomwiseModel()
loss_fn = build_mse_loss(["energy", "forces"], loss_tradeoff=[0.1, 0.9])
metrics = [MeanAbsoluteError("energy", "energy"), MeanAbsoluteError("forces", "forces", element_wise=True)]
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
trainer = Trainer(model, loss_fn, optimizer, make_batches(12, 1), make_batches(6, 2), hooks=[LoggingHook(metrics)])
trainer.train(torch.device("cpu"), n_epochs=3)
