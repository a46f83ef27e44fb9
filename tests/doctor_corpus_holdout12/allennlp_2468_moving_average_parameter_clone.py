# Source: https://github.com/allenai/allennlp/pull/2468
#   code: allennlp/training/moving_average.py and allennlp/training/trainer.py at the parent of e4174868
# Adapted: MovingAverage/ExponentialMovingAverage kept as they were (Registrable dropped); the Trainer is
# cut down to its _train_epoch / _validation_loss bodies around the moving average, with a small
# two-layer classifier on random data instead of an allennlp Model and iterator, no tqdm/tensorboard,
# 2 epochs of 300 batches and 5 validation batches on CPU.
from typing import Iterable, Optional, Tuple

import torch
import torch.nn as nn

NamedParameter = Tuple[str, torch.Tensor]


class MovingAverage:
    def __init__(self, parameters: Iterable[NamedParameter]) -> None:
        self._parameters = list(parameters)
        self._shadows = {name: parameter.clone() for name, parameter in self._parameters}
        self._backups = {name: parameter.clone() for name, parameter in self._parameters}

    def apply(self, num_updates: Optional[int] = None):
        raise NotImplementedError

    def assign_average_value(self) -> None:
        for name, parameter in self._parameters:
            self._backups[name].data = parameter.data.clone()
            parameter.data = self._shadows[name].data.clone()

    def restore(self) -> None:
        for name, parameter in self._parameters:
            parameter.data = self._backups[name].data.clone()


class ExponentialMovingAverage(MovingAverage):
    def __init__(self, parameters: Iterable[NamedParameter], decay: float = 0.9999,
                 numerator: float = 1.0, denominator: float = 10.0) -> None:
        super().__init__(parameters)
        self._decay = decay
        self._numerator = numerator
        self._denominator = denominator

    def apply(self, num_updates: Optional[int] = None) -> None:
        if num_updates is not None:
            decay = min(self._decay, (self._numerator + num_updates) / (self._denominator + num_updates))
        else:
            decay = self._decay

        for name, parameter in self._parameters:
            self._shadows[name].mul_(decay).add_((1 - decay) * parameter.data)


class Classifier(nn.Module):
    def __init__(self, input_dim=256, hidden_dim=512, num_labels=10):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.Tanh())
        self.projection = nn.Linear(hidden_dim, num_labels)

    def forward(self, tokens, label):
        logits = self.projection(self.encoder(tokens))
        return {"logits": logits, "loss": nn.functional.cross_entropy(logits, label)}


class Trainer:
    def __init__(self, model, optimizer, train_data, validation_data, moving_average=None):
        self.model = model
        self.optimizer = optimizer
        self.train_data = train_data
        self._validation_data = validation_data
        self._moving_average = moving_average
        self._batch_num_total = None

    def batch_loss(self, batch, for_training):
        return self.model(*batch)["loss"]

    def _train_epoch(self, epoch):
        train_loss = 0.0
        self.model.train()
        batches_this_epoch = 0
        if self._batch_num_total is None:
            self._batch_num_total = 0
        for batch_group in self.train_data:
            batches_this_epoch += 1
            self._batch_num_total += 1
            batch_num_total = self._batch_num_total

            self.optimizer.zero_grad()
            loss = self.batch_loss(batch_group, for_training=True)
            if torch.isnan(loss):
                raise ValueError("nan loss encountered")
            loss.backward()
            train_loss += loss.item()
            self.optimizer.step()

            if self._moving_average is not None:
                self._moving_average.apply(batch_num_total)
        return train_loss / batches_this_epoch

    def _validation_loss(self):
        self.model.eval()
        if self._moving_average is not None:
            self._moving_average.assign_average_value()
        batches_this_epoch = 0
        val_loss = 0
        for batch_group in self._validation_data:
            loss = self.batch_loss(batch_group, for_training=False)
            if loss is not None:
                batches_this_epoch += 1
                val_loss += loss.detach().cpu().numpy()
        if self._moving_average is not None:
            self._moving_average.restore()
        return val_loss, batches_this_epoch

    def train(self, num_epochs):
        for epoch in range(num_epochs):
            train_loss = self._train_epoch(epoch)
            val_loss, num_batches = self._validation_loss()
            print(f"epoch {epoch}: train loss {train_loss:.4f}, validation loss {val_loss / num_batches:.4f}")


def make_batches(n, batch_size=32):
    return [(torch.randn(batch_size, 256), torch.randint(0, 10, (batch_size,))) for _ in range(n)]


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
moving_average = ExponentialMovingAverage(model.named_parameters(), decay=0.9999)
trainer = Trainer(model, optimizer, make_batches(300), make_batches(5), moving_average=moving_average)
trainer.train(num_epochs=2)
