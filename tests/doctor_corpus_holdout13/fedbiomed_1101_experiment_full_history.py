# Source: https://github.com/fedbiomed/fedbiomed/issues/1101
#   code: fedbiomed/researcher/federated_workflows/_experiment.py (Experiment.run_once, run,
#   _update_history, retain_full_history defaulting to True) and the FedAverage aggregator,
#   at the time of the issue
# Adapted: the nodes, requests and TrainingJob are in-process stand-ins: each of 3 nodes
#   trains a copy of the training plan's model for 5 updates on random MNIST-like data and
#   replies with its parameters (as the node replies carry them) and sample size; no secure
#   aggregation, node state agent, breakpoints or monitoring; a 784-256-10 MLP instead of the
#   issue's 600 MB model; 40 rounds.
import copy
from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F


class TrainingPlan:
    def __init__(self):
        self.model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))

    def after_training_params(self) -> Dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self.model.state_dict().items()}

    def set_model_params(self, params):
        self.model.load_state_dict(params)


class Node:
    def __init__(self, node_id, n_samples):
        self.node_id = node_id
        self.data = torch.randn(n_samples, 1, 28, 28)
        self.target = torch.randint(0, 10, (n_samples,))

    def train(self, training_plan, training_args):
        model = copy.deepcopy(training_plan.model)
        optimizer = torch.optim.SGD(model.parameters(), lr=training_args['lr'])
        for i in range(training_args['num_updates']):
            idx = torch.randint(0, len(self.data), (training_args['batch_size'],))
            loss = F.cross_entropy(model(self.data[idx]), self.target[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return {'node_id': self.node_id, 'success': True, 'params': {k: v.clone() for k, v in model.state_dict().items()},
                'sample_size': len(self.data), 'timing': {'rtime_training': 0.0}}


class TrainingJob:
    def __init__(self, nodes, training_plan, training_args):
        self.nodes, self.training_plan, self.training_args = nodes, training_plan, training_args

    def execute(self):
        training_replies = {node.node_id: node.train(self.training_plan, self.training_args) for node in self.nodes}
        return training_replies, {}


class FedAverage:
    def aggregate(self, model_params, weights):
        return {k: sum(w * p[k] for p, w in zip(model_params, weights)) for k in model_params[0]}


class Experiment:
    def __init__(self, nodes, training_plan, training_args, round_limit, aggregator, retain_full_history=True):
        self._nodes, self._training_plan, self._training_args = nodes, training_plan, training_args
        self._round_limit, self._aggregator = round_limit, aggregator
        self._round_current = 0
        self._training_replies = {}
        self._aggregated_params = {}
        self._retain_full_history = retain_full_history

    def run_once(self):
        job = TrainingJob(nodes=self._nodes, training_plan=self._training_plan, training_args=self._training_args)
        training_replies, aux_vars = job.execute()
        total = sum(r['sample_size'] for r in training_replies.values())
        model_params = [r['params'] for r in training_replies.values()]
        weights = [r['sample_size'] / total for r in training_replies.values()]
        aggregated_params = self._aggregator.aggregate(model_params, weights)
        self._training_plan.set_model_params(aggregated_params)
        self._update_history(training_replies, aggregated_params)
        self._round_current += 1
        return 1

    def _update_history(self, training_replies, aggregated_params):
        if self._retain_full_history:
            self._training_replies[self._round_current] = training_replies
            self._aggregated_params[self._round_current] = {'params': aggregated_params}
        else:
            self._training_replies = {self._round_current: training_replies}
            self._aggregated_params = {self._round_current: {'params': aggregated_params}}

    def run(self):
        while self._round_current < self._round_limit:
            self.run_once()
            print(f"round {self._round_current} done")


torch.manual_seed(0)
exp = Experiment(nodes=[Node(f"node_{i}", 256) for i in range(3)], training_plan=TrainingPlan(),
                 training_args={'lr': 0.01, 'num_updates': 5, 'batch_size': 32}, round_limit=40,
                 aggregator=FedAverage())
exp.run()
