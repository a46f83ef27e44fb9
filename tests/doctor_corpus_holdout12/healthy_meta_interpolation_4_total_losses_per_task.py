# Source: https://github.com/myungsub/meta-interpolation/issues/4
#   code: meta_learning_system.py (MetaLearningSystem.forward, apply_inner_loop_update,
#   update_loss_metrics, get_across_task_loss_metrics, meta_update, run_train_iter) and the
#   AverageMeter of utils.py of the repository
# Adapted: forward's per-task inner loop, the task_losses / total_losses lists, the loss meters
#   and the meta update kept as they were (multi-step loss on, second order off, no attenuation,
#   no evaluation metrics); the frame-interpolation network replaced by a small conv net run
#   with torch.func.functional_call on the fast weights, its criterion by an L1 loss returned as
#   {'total': loss}; the LSLR inner-loop optimizer by per-step learning rates applied the same
#   way; the Vimeo loader by 30 batches of 4 random 7-frame 3x32x32 clips; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn
from torch.func import functional_call


class AverageMeter(object):
    def __init__(self):
        self.reset()

    def reset(self):
        self.val, self.avg, self.sum, self.count = 0, 0, 0, 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class InterpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(6, 32, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(32, 3, 3, padding=1))

    def forward(self, frame0, frame1):
        return self.body(torch.cat([frame0, frame1], dim=1))


class MetaLearningSystem(nn.Module):
    def __init__(self, num_steps=2, inner_lr=1e-3, meta_lr=1e-4):
        super().__init__()
        self.net = InterpNet()
        self.num_steps = num_steps
        self.inner_lrs = {name.replace('.', '-'): torch.full((num_steps,), inner_lr)
                          for name, _ in self.net.named_parameters()}
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=meta_lr)

    def get_per_step_loss_importance_vector(self):
        return torch.ones(self.num_steps) / self.num_steps

    def net_forward(self, frame0, frame1, target, weights):
        output = functional_call(self.net, weights, (frame0, frame1))
        losses = {'total': (output - target).abs().mean()}
        return losses, output

    def apply_inner_loop_update(self, loss, names_weights_copy, use_second_order, current_step_idx):
        self.net.zero_grad()
        grads = torch.autograd.grad(loss, names_weights_copy.values(),
                                    create_graph=use_second_order, allow_unused=True)
        names_grads_copy = dict(zip(names_weights_copy.keys(), grads))
        return {key: value - self.inner_lrs[key.replace('.', '-')][current_step_idx] * names_grads_copy[key]
                for key, value in names_weights_copy.items()}

    def update_loss_metrics(self, task_losses, target_loss):
        for loss_key, loss_value in target_loss.items():
            if loss_key not in task_losses.keys():
                task_losses[loss_key] = AverageMeter()
            task_losses[loss_key].update(loss_value.detach().cpu().data.numpy())

    def get_across_task_loss_metrics(self, total_losses, specific_losses):
        losses = dict()
        losses['loss'] = torch.mean(torch.stack(total_losses))
        for key, avg_meters in specific_losses.items():
            losses[key] = avg_meters.avg
        return losses

    def forward(self, data_batch, use_second_order=False):
        frames = data_batch
        total_losses = []
        loss_accumulator = {'total': AverageMeter()}
        per_task_target_preds = [[] for i in range(len(frames[0]))]
        self.net.zero_grad()

        for task_id in range(len(frames[0])):
            task_losses = []
            per_step_loss_importance_vectors = self.get_per_step_loss_importance_vector()
            names_weights_copy = dict(self.net.named_parameters())
            support_idxs = [[0, 2, 4], [2, 4, 6]]
            target_idx = [2, 3, 4]

            for num_step in range(self.num_steps):
                support_loss = 0
                for ind in support_idxs:
                    _loss, _ = self.net_forward(frames[ind[0]][task_id].unsqueeze(0),
                                                frames[ind[2]][task_id].unsqueeze(0),
                                                frames[ind[1]][task_id].unsqueeze(0),
                                                weights=names_weights_copy)
                    support_loss = support_loss + _loss['total']

                names_weights_copy = self.apply_inner_loop_update(loss=support_loss,
                                                                  names_weights_copy=names_weights_copy,
                                                                  use_second_order=use_second_order,
                                                                  current_step_idx=num_step)

                target_loss, target_preds = self.net_forward(frames[target_idx[0]][task_id].unsqueeze(0),
                                                             frames[target_idx[2]][task_id].unsqueeze(0),
                                                             frames[target_idx[1]][task_id].unsqueeze(0),
                                                             weights=names_weights_copy)
                task_losses.append(per_step_loss_importance_vectors[num_step] * target_loss['total'])
                self.update_loss_metrics(loss_accumulator, target_loss)

            per_task_target_preds[task_id] = target_preds.detach()
            task_losses = torch.sum(torch.stack(task_losses))
            total_losses.append(task_losses)

        losses = self.get_across_task_loss_metrics(total_losses=total_losses,
                                                   specific_losses=loss_accumulator)
        return losses, per_task_target_preds

    def meta_update(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def run_train_iter(self, data_batch):
        losses, preds = self.forward(data_batch=data_batch)
        self.meta_update(loss=losses['loss'])
        self.optimizer.zero_grad()
        self.zero_grad()
        return losses, preds


torch.manual_seed(0)
model = MetaLearningSystem()
history = []
for it in range(30):
    data_batch = [torch.rand(4, 3, 32, 32) for _ in range(7)]
    losses, preds = model.run_train_iter(data_batch)
    history.append(losses['total'])
    if it % 5 == 0:
        print(it, float(losses['loss']), float(np.mean(history)))
