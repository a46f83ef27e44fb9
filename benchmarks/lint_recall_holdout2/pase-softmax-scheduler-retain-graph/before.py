# Source: https://github.com/santi-pdp/pase/blob/ee293b582cd73ff687a0c002a2e0579cec72ef94/pase/models/WorkerScheduler/worker_scheduler.py
# Adapted excerpt, before the fix https://github.com/santi-pdp/pase/commit/b38d74904883ce1a0c98bd8508f02fa91365706d
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
import random
import numpy as np
import torch.nn.functional as F
from .min_norm_solvers import MinNormSolver, gradient_normalizers
from torch.autograd import Variable


class backprop_scheduler(object):

    def __init__(self, model, mode=None):
        self.model = model
        self.mode = mode
        self.num_worker = len(self.model.regression_workers) + len(self.model.classification_workers)
        self.Q = torch.zeros(self.num_worker).detach()
        self.last_loss = torch.zeros(self.num_worker).detach()
        self.pi = torch.ones(self.num_worker).detach()


    def __call__(self, preds, label, cls_optim, regr_optim, frontend_optim, device, h=None, dropout_rate=None, delta=None, temperture=None, alpha=None, batch=None):

        if self.mode == "base":
            return self._base_scheduler(preds, label, cls_optim, regr_optim, frontend_optim, device)
        elif self.mode == "adversarial":
            return self._adversarial(preds, label, cls_optim, regr_optim, frontend_optim, device)
        elif self.mode == "select_one":
            return self._select_one(preds, label, cls_optim, regr_optim, frontend_optim, device)
        elif self.mode == "select_half":
            return self._select_half(preds, label, cls_optim, regr_optim, frontend_optim, device)
        elif self.mode == "dropout":
            return self._drop_out(preds, label, cls_optim, regr_optim, frontend_optim, device=device, dropout_rate=dropout_rate)
        elif self.mode == "hyper_volume":
            return self._hyper_volume(preds, label, cls_optim, regr_optim, frontend_optim, device=device, delta=delta)
        elif self.mode == "softmax":
            return self._softmax(preds, label, cls_optim, regr_optim, frontend_optim, temperture=temperture, device=device)
        elif self.mode == "adaptive":
            return self._online_adaptive(preds, label, cls_optim, regr_optim, frontend_optim, temperture=temperture, alpha=alpha, device=device)
        elif self.mode == "MGD":
            return self._MGDA(preds, label, cls_optim, regr_optim, frontend_optim, batch=batch, device=device)
        else:
            raise NotImplementedError

    ...  # (lines 43-240 omitted)
    def _softmax(self, preds, label, cls_optim, regr_optim, frontend_optim, temperture, device):
        assert temperture > 0

        num_worker = len(self.model.regression_workers) + len(self.model.classification_workers)
        loss_tmp = []
        idx = 0

        frontend_optim.zero_grad()
        losses = {}
        for worker in self.model.classification_workers:
            cls_optim[worker.name].zero_grad()
            loss = worker.loss(preds[worker.name], label[worker.name])
            losses[worker.name] = loss
            loss_tmp.append(loss.item() * temperture)
            # idx += 1

        for worker in self.model.regression_workers:
            regr_optim[worker.name].zero_grad()
            loss = worker.loss(preds[worker.name], label[worker.name])
            losses[worker.name] = loss
            loss_tmp.append(loss.item() * temperture)
            # idx += 1


        alpha = self._stable_softmax(loss_tmp)

        tot_loss = 0
        for worker in self.model.classification_workers:
            tot_loss += alpha[idx] * losses[worker.name]
            idx += 1
        for worker in self.model.regression_workers:
            tot_loss += alpha[idx] * losses[worker.name]
            idx += 1

        # tot_loss = torch.sum(alpha.detach() * loss_vec)
        tot_loss.backward(retain_graph=True)


        for _, optim in cls_optim.items():
            optim.step()

        for _, optim in regr_optim.items():
            optim.step()

        frontend_optim.step()
        losses["total"] = tot_loss

        return losses

# ... (lines 290-420 omitted)
