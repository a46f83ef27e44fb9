# Source: https://github.com/pnnl/neuromancer/pull/292
#   code: src/neuromancer/trainer.py (Trainer.__init__, Trainer.train), problem.py
#   (Problem.forward, Problem.step) and callbacks.py (Callback) before the pull request
# Adapted: Trainer.train kept as it was (lr scheduler, logger and multi-fidelity branches
#   included); the PenaltyLoss/Node machinery replaced by a small Node (an MLP mapping the
#   parameters 'p' to a solution 'x') and a loss returning {'loss': ...} in the same dict
#   interface; the dataloaders replaced by lists of dict batches with 'name' = 'train' / 'dev';
#   the pydot graph dropped; 3 epochs of 40 batches of 64, cpu, seeded.
from copy import deepcopy
from typing import Callable, Dict, List

import numpy as np
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import ReduceLROnPlateau


def move_batch_to_device(batch, device="cpu"):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


class Callback:
    def __init__(self):
        pass

    def begin_train(self, trainer):
        pass

    def begin_epoch(self, trainer, output):
        pass

    def begin_eval(self, trainer, output):
        pass

    def end_batch(self, trainer, output):
        pass

    def end_eval(self, trainer, output):
        pass

    def end_epoch(self, trainer, output):
        pass

    def end_train(self, trainer, output):
        pass


class Node(nn.Module):
    def __init__(self, callable, input_keys, output_keys, name=None):
        super().__init__()
        self.input_keys, self.output_keys = input_keys, output_keys
        self.callable, self.name = callable, name

    def forward(self, data):
        inputs = [data[k] for k in self.input_keys]
        output = self.callable(*inputs)
        if not isinstance(output, tuple):
            output = [output]
        return {k: v for k, v in zip(self.output_keys, output)}


class ObjectiveLoss(nn.Module):
    name = 'loss'

    def __init__(self):
        super().__init__()
        self.input_keys, self.output_keys = ['x', 'p'], ['loss']

    def forward(self, input_dict):
        x, p = input_dict['x'], input_dict['p']
        objective = ((x[:, :1] - p[:, :1] ** 2) ** 2 + (x[:, 1:] - p[:, 1:]) ** 2).mean()
        penalty = torch.relu(x.sum(dim=1) - 2.0).pow(2).mean()
        input_dict['loss'] = objective + 10. * penalty
        return input_dict


class Problem(nn.Module):
    def __init__(self, nodes: List[Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]]],
                 loss: Callable[[Dict[str, torch.Tensor]], Dict[str, torch.Tensor]],
                 grad_inference=False, check_overwrite=False):
        super().__init__()
        self.nodes = nn.ModuleList(nodes)
        self.loss = loss
        self.grad_inference = grad_inference
        self.check_overwrite = check_overwrite

    def forward(self, data: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        output_dict = self.step(data)
        output_dict = self.loss(output_dict)
        if isinstance(output_dict, torch.Tensor):
            output_dict = {self.loss.name: output_dict}
        return {f'{data["name"]}_{k}': v for k, v in output_dict.items()}

    def step(self, input_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        for node in self.nodes:
            output_dict = node(input_dict)
            if isinstance(output_dict, torch.Tensor):
                output_dict = {node.name: output_dict}
            input_dict = {**input_dict, **output_dict}
        return input_dict


class Trainer:
    def __init__(
        self,
        problem: Problem,
        train_data,
        dev_data=None,
        test_data=None,
        optimizer: torch.optim.Optimizer = None,
        logger=None,
        callback=Callback(),
        lr_scheduler=False,
        epochs=1000,
        epoch_verbose=1,
        patience=5,
        warmup=0,
        train_metric="train_loss",
        dev_metric="dev_loss",
        test_metric="test_loss",
        eval_metric="dev_loss",
        eval_mode="min",
        clip=100.0,
        multi_fidelity=False,
        device="cpu"
    ):
        self.model = problem
        self.optimizer = optimizer if optimizer is not None else torch.optim.Adam(problem.parameters(), 0.01, betas=(0.0, 0.9))
        self.train_data = train_data
        self.dev_data = dev_data
        self.test_data = test_data
        self.callback = callback
        self.logger = logger
        self.epochs = epochs
        self.current_epoch = 0
        self.epoch_verbose = epoch_verbose
        if logger is not None:
            self.logger.log_weights(self.model)
        self.train_metric = train_metric
        self.dev_metric = dev_metric
        self.test_metric = test_metric
        self.eval_metric = eval_metric
        self._eval_min = eval_mode == "min"
        self.lr_scheduler = (
            ReduceLROnPlateau(self.optimizer, mode="min", factor=0.5, patience=100)
            if lr_scheduler
            else None
        )
        self.patience = patience
        self.warmup = warmup
        self.badcount = 0
        self.clip = clip
        self.best_devloss = np.finfo(np.float32).max if self._eval_min else 0.
        self.best_model = deepcopy(self.model.state_dict())
        self.multi_fidelity=multi_fidelity
        self.device = device

    def train(self):
        self.callback.begin_train(self)

        try:
            for i in range(self.current_epoch, self.current_epoch+self.epochs):

                self.model.train()
                losses = []
                for t_batch in self.train_data:
                    t_batch['epoch'] = i
                    t_batch = move_batch_to_device(t_batch, self.device)
                    output = self.model(t_batch)

                    if self.multi_fidelity:
                        for node in self.model.nodes:
                            alpha_loss = node.callable.get_alpha_loss()
                            output[self.train_metric] += alpha_loss

                    self.optimizer.zero_grad()
                    output[self.train_metric].backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
                    self.optimizer.step()
                    losses.append(output[self.train_metric])
                    self.callback.end_batch(self, output)

                output[f'mean_{self.train_metric}'] = torch.mean(torch.stack(losses))
                self.callback.begin_epoch(self, output)

                if self.lr_scheduler is not None:
                    self.lr_scheduler.step(output[f'mean_{self.train_metric}'])

                with torch.set_grad_enabled(self.model.grad_inference):
                    self.model.eval()
                    if self.dev_data is not None:
                        losses = []
                        for d_batch in self.dev_data:
                            d_batch = move_batch_to_device(d_batch, self.device)
                            eval_output = self.model(d_batch)
                            losses.append(eval_output[self.dev_metric])
                        eval_output[f'mean_{self.dev_metric}'] = torch.mean(torch.stack(losses))
                        output = {**output, **eval_output}
                    self.callback.begin_eval(self, output)

                    if (self._eval_min and output[self.eval_metric] < self.best_devloss)\
                            or (not self._eval_min and output[self.eval_metric] > self.best_devloss):
                        self.best_model = deepcopy(self.model.state_dict())
                        self.best_devloss = output[self.eval_metric]
                        self.badcount = 0
                    else:
                        if i > self.warmup:
                            self.badcount += 1
                    if self.logger is not None:
                        self.logger.log_metrics(output, step=i)
                    else:
                        mean_loss = output[f'mean_{self.train_metric}']
                        if i % (self.epoch_verbose) == 0:
                            print(f'epoch: {i}  {self.train_metric}: {mean_loss}')

                    self.callback.end_eval(self, output)

                    self.callback.end_epoch(self, output)

                    if self.badcount > self.patience:
                        print('Early stopping!!!')
                        break
                    self.current_epoch = i + 1

        except KeyboardInterrupt:
            print("Interrupted training loop.")

        self.callback.end_train(self, output)

        self.model.load_state_dict(self.best_model)
        return self.best_model


def make_batches(name, n_batches, batch_size, generator):
    return [{'p': torch.rand(batch_size, 2, generator=generator) * 2 - 1, 'name': name}
            for _ in range(n_batches)]


if __name__ == '__main__':
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    func = nn.Sequential(nn.Linear(2, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 2))
    sol_map = Node(func, ['p'], ['x'], name='map')
    problem = Problem([sol_map], ObjectiveLoss())
    train_data = make_batches('train', 40, 64, generator)
    dev_data = make_batches('dev', 10, 64, generator)
    optimizer = torch.optim.AdamW(problem.parameters(), lr=1e-3)
    trainer = Trainer(problem, train_data, dev_data, optimizer=optimizer, epochs=3,
                      patience=10, warmup=5)
    best_model = trainer.train()
