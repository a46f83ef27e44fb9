# Source: https://github.com/rabbityl/lepard/issues/12
#   code: lib/timer.py (AverageMeter) and lib/trainer.py (Trainer.inference_one_batch,
#   inference_one_epoch, train) at commit 23a93d0
# Adapted: the KPFCN backbone, transformer and matching heads are replaced by a small
#   point-feature network on random point pairs, and MatchMotionLoss by a loss of the same
#   shape that returns a dict of tensors ('loss' and its two terms, plus a recall computed
#   from comparisons); no tensorboard writer, logger file, timers, checkpoints or
#   gradient validation; 3 epochs of 60 iterations, iter_size 1.
import gc

import torch
import torch.nn as nn
import torch.nn.functional as F


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0.0
        self.sq_sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count
        self.sq_sum += val ** 2 * n
        self.var = self.sq_sum / self.count - self.avg ** 2


class Pipeline(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, inputs):
        src_feats = self.backbone(inputs['src_pcd'])
        tgt_feats = self.backbone(inputs['tgt_pcd'])
        conf_matrix = torch.einsum('nc,mc->nm', src_feats, tgt_feats).softmax(1)
        return {'conf_matrix': conf_matrix, 'src_feats': src_feats, 'tgt_feats': tgt_feats}


class MatchMotionLoss(nn.Module):
    def forward(self, data, inputs):
        conf = data['conf_matrix']
        gt = inputs['correspondences']
        match_loss = -torch.log(conf[gt[:, 0], gt[:, 1]] + 1e-6).mean()
        reg_loss = (data['src_feats'].norm(dim=1) - 1).pow(2).mean()
        recall = (conf.argmax(1)[gt[:, 0]] == gt[:, 1]).float().mean()
        return {'loss': match_loss + 0.1 * reg_loss, 'match_loss': match_loss, 'reg_loss': reg_loss,
                'coarse_recall': recall}


class Trainer:
    def __init__(self, model, loss, optimizer, n_points=256, iter_size=1):
        self.model, self.loss, self.optimizer = model, loss, optimizer
        self.n_points, self.iter_size, self.best_loss = n_points, iter_size, 1e5

    def next_batch(self):
        src = torch.rand(self.n_points, 3)
        perm = torch.randperm(self.n_points)
        tgt = src[perm] + 0.01 * torch.randn(self.n_points, 3)
        corr = torch.stack([perm, torch.arange(self.n_points)], 1)[:128]
        return {'src_pcd': src, 'tgt_pcd': tgt, 'correspondences': corr}

    def inference_one_batch(self, inputs, phase):
        inputs['phase'] = phase
        if phase == 'train':
            self.model.train()
            data = self.model(inputs)
            loss_info = self.loss(data, inputs)
            loss_info['loss'].backward()
        else:
            self.model.eval()
            with torch.no_grad():
                data = self.model(inputs)
                loss_info = self.loss(data, inputs)
        return loss_info

    def inference_one_epoch(self, epoch, phase, num_iter=60):
        gc.collect()
        stats_meter = None
        self.optimizer.zero_grad()
        for c_iter in range(num_iter):
            inputs = self.next_batch()
            loss_info = self.inference_one_batch(inputs, phase)
            if (c_iter + 1) % self.iter_size == 0 and phase == 'train':
                self.optimizer.step()
                self.optimizer.zero_grad()
            if stats_meter is None:
                stats_meter = dict()
                for key, _ in loss_info.items():
                    stats_meter[key] = AverageMeter()
            for key, value in loss_info.items():
                stats_meter[key].update(value)
        message = f'{phase} Epoch: {epoch}'
        for key, value in stats_meter.items():
            message += f'{key}: {value.avg:.2f}\t'
        print(message)
        return stats_meter

    def train(self, max_epoch=3):
        for epoch in range(max_epoch):
            stats_meter = self.inference_one_epoch(epoch, 'train')
            if stats_meter['loss'].avg < self.best_loss:
                self.best_loss = stats_meter['loss'].avg


torch.manual_seed(0)
model = Pipeline()
Trainer(model, MatchMotionLoss(), torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)).train()
