# Source: https://github.com/Quantinuum/lambeq/pull/251
#   code: lambeq/training/pytorch_trainer.py (PytorchTrainer.training_step, validation_step) and
#   lambeq/training/trainer.py (Trainer.fit) at 362b28d, the version the pull request targets
# Adapted: fit, training_step and validation_step kept as they were (checkpoint saving,
#   tensorboard and the progress bar dropped; printer is print every 10th batch); lambeq's
#   PytorchModel over string diagrams replaced by a stand-in with the same call (model(x) on a
#   list of inputs) that embeds 8-token sentences (EmbeddingBag + MLP, 2 logits); the dataset
#   by a small batch iterator with batch_size and __len__; the evaluation function is the
#   lambeq tutorial's accuracy; 240 training and 60 validation sentences, batch 12, 4 epochs;
#   cpu, seeded.
import random
from math import ceil

import torch


class Dataset:
    def __init__(self, data, targets, batch_size):
        self.data, self.targets, self.batch_size = data, targets, batch_size

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        for i in range(0, len(self.data), self.batch_size):
            yield self.data[i:i + self.batch_size], self.targets[i:i + self.batch_size]


class PytorchModel(torch.nn.Module):
    def __init__(self, vocab=200, dim=32):
        super().__init__()
        self.embed = torch.nn.EmbeddingBag(vocab, dim)
        self.net = torch.nn.Sequential(torch.nn.Linear(dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))

    def forward(self, x):
        return self.net(self.embed(torch.tensor(x)))


class PytorchTrainer:
    def __init__(self, model, loss_function, epochs, optimizer=torch.optim.AdamW,
                 learning_rate=1e-3, evaluate_functions=None, evaluate_on_train=True, seed=None):
        if seed is not None:
            torch.manual_seed(seed)
            random.seed(seed)
        self.model = model
        self.loss_function = loss_function
        self.epochs = epochs
        self.evaluate_functions = evaluate_functions
        self.evaluate_on_train = evaluate_on_train
        self.device = torch.device('cpu')
        self.optimizer = optimizer(self.model.parameters(), lr=learning_rate)
        self.printer = print
        self.start_epoch = 0
        self.start_step = 0

        self.train_costs = []
        self.train_epoch_costs = []
        self.train_results = {}
        self._train_results_epoch = {}

        self.val_costs = []
        self.val_results = {}
        self._val_results_epoch = {}

        if self.evaluate_functions is not None:
            for name in self.evaluate_functions:
                self.val_results[name] = []
                self._val_results_epoch[name] = []
                self.train_results[name] = []
                self._train_results_epoch[name] = []

    def validation_step(self, batch):
        x, y = batch
        with torch.no_grad():
            y_hat = self.model(x)
            loss = self.loss_function(y_hat, y.to(self.device))
        return y_hat, loss.item()

    def training_step(self, batch):
        x, y = batch
        y_hat = self.model(x)
        loss = self.loss_function(y_hat, y.to(self.device))
        self.train_costs.append(loss.item())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return y_hat, loss.item()

    def fit(self, train_dataset, val_dataset=None, evaluation_step=1):
        step = self.start_step
        batches_per_epoch = ceil(len(train_dataset)/train_dataset.batch_size)

        for epoch in range(self.start_epoch, self.epochs):
            epoch_loss = 0.0
            for batch_idx, batch in enumerate(train_dataset):
                step += 1
                x, y_label = batch
                y_hat, loss = self.training_step(batch)
                if (self.evaluate_on_train and
                        self.evaluate_functions is not None):
                    for metr, func in self.evaluate_functions.items():
                        res = func(y_hat, y_label)
                        self._train_results_epoch[metr].append(len(x)*res)
                if batch_idx % 10 == 0:
                    self.printer(f'Epoch: {epoch+1}, Batch: {batch_idx+1}/{batches_per_epoch}, '
                                 f'train/loss: {loss:.4f}')
                epoch_loss += len(batch[0])*loss
            self.train_epoch_costs.append(epoch_loss/len(train_dataset))

            if (self.evaluate_on_train and
                    self.evaluate_functions is not None):
                for name in self._train_results_epoch:
                    self.train_results[name].append(
                        sum(self._train_results_epoch[name])/len(train_dataset)
                    )
                    self._train_results_epoch[name] = []  # reset
                    self.printer(
                        f'Epoch: {epoch+1}, train/{name}: '
                        f'{self.train_results[name][-1]:.4f}')

            if val_dataset is not None:
                if epoch % evaluation_step == 0:
                    val_loss = 0.0
                    for v_batch in val_dataset:
                        x_val, y_label_val = v_batch
                        y_hat_val, cur_loss = self.validation_step(v_batch)
                        val_loss += cur_loss * len(x_val)
                        if self.evaluate_functions is not None:
                            for metr, func in self.evaluate_functions.items():
                                res = func(y_hat_val, y_label_val)
                                self._val_results_epoch[metr].append(
                                    len(x_val)*res)
                    val_loss /= len(val_dataset)
                    self.val_costs.append(val_loss)
                    self.printer(f'Epoch: {epoch+1}, val/loss: {val_loss:.4f}')

                    if self.evaluate_functions is not None:
                        for name in self._val_results_epoch:
                            self.val_results[name].append(
                                sum(self._val_results_epoch[name])
                                    /len(val_dataset)
                            )
                            self._val_results_epoch[name] = []  # reset
        self.printer("\nTraining successful!")


random.seed(0)
torch.manual_seed(0)


def make_split(n):
    data = [[random.randint(0, 199) for _ in range(8)] for _ in range(n)]
    labels = torch.tensor([[1.0, 0.0] if sum(s) % 2 else [0.0, 1.0] for s in data])
    return data, labels


train_data, train_labels = make_split(240)
val_data, val_labels = make_split(60)

sig = torch.sigmoid


def accuracy(y_hat, y):
    return torch.sum(torch.eq(torch.round(sig(y_hat)), y))/len(y)/2


model = PytorchModel()
trainer = PytorchTrainer(model=model, loss_function=torch.nn.BCEWithLogitsLoss(), epochs=4,
                         learning_rate=3e-3, evaluate_functions={'acc': accuracy},
                         evaluate_on_train=True, seed=0)
trainer.fit(Dataset(train_data, train_labels, 12), Dataset(val_data, val_labels, 12), evaluation_step=1)
