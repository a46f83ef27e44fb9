# Source: https://github.com/VISION-SJTU/DiffusionTrack/issues/2
#   code: lib/train/actors/diffusiontrack.py (DiffusionTrackActor), lib/train/trainers/ltr_trainer.py
#   (LTRTrainer.cycle_dataset, train_epoch, _update_stats, _print_stats, _stats_new_epoch) and
#   lib/train/admin/stats.py (AverageMeter, StatValue) at 047a676
# Adapted: the actor, LTRTrainer's loop and stats kept as they were (timing, tensorboard, amp,
#   DistributedSampler and the log file dropped, lr_scheduler.get_lr() read as get_last_lr());
#   the DiffusionTrack network replaced by a small stand-in with the same modes (encoder,
#   prepare_target, decoder, compute_loss returning loss_dict and weight_dict with loss_ce,
#   loss_bbox and loss_giou); the box helpers of lib/utils/box_ops written inline; the GOT-10k
#   loader by 25 random batches of 4 template and search crops of 3x32x32 with their boxes;
#   3 epochs, AdamW and StepLR; cpu, seeded.
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


def box_xywh_to_xyxy(x):
    x1, y1, w, h = x.unbind(-1)
    return torch.stack([x1, y1, x1 + w, y1 + h], dim=-1)


def box_xyxy_to_cxcywh(x):
    x0, y0, x1, y1 = x.unbind(-1)
    return torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0), (y1 - y0)], dim=-1)


class StatValue:
    def __init__(self):
        self.clear()

    def reset(self):
        self.val = 0

    def clear(self):
        self.reset()
        self.history = []

    def update(self, val):
        self.val = val
        self.history.append(self.val)


class AverageMeter(object):
    def __init__(self):
        self.clear()
        self.has_new_data = False

    def reset(self):
        self.avg = 0
        self.val = 0
        self.sum = 0
        self.count = 0

    def clear(self):
        self.reset()
        self.history = []

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def new_epoch(self):
        if self.count > 0:
            self.history.append(self.avg)
            self.reset()
            self.has_new_data = True
        else:
            self.has_new_data = False


class DiffusionTrackNet(nn.Module):
    def __init__(self, dim=64, num_boxes=16):
        super().__init__()
        self.num_boxes = num_boxes
        self.backbone = nn.Sequential(nn.Conv2d(3, dim, 4, 4), nn.GELU(), nn.Conv2d(dim, dim, 3, padding=1))
        self.time_embed = nn.Embedding(1000, dim)
        self.box_embed = nn.Linear(4, dim)
        self.head = nn.Sequential(nn.Linear(2 * dim, dim), nn.GELU(), nn.Linear(dim, 4 + 1))

    def forward(self, images_list=None, targets=None, xz=None, boxes=None, t=None, outputs=None, new_targets=None, mode=None):
        if mode == 'encoder':
            return torch.cat([self.backbone(im).flatten(2) for im in images_list], dim=2).mean(2)
        if mode == 'prepare_target':
            ts = torch.randint(0, 1000, (targets.shape[0],))
            noises = torch.randn(targets.shape[0], self.num_boxes, 4)
            diffused_boxes = (targets[:, None, :] + 0.1 * noises).clamp(0, 1)
            return targets, diffused_boxes, noises, ts
        if mode == 'decoder':
            h = torch.cat([xz[:, None, :].expand(-1, self.num_boxes, -1),
                           self.box_embed(boxes / 32.0) + self.time_embed(t)[:, None, :]], dim=-1)
            out = self.head(h)
            return {'pred_boxes': out[..., :4].sigmoid(), 'pred_logits': out[..., 4]}
        if mode == 'compute_loss':
            pred, tgt = outputs['pred_boxes'], new_targets[:, None, :].expand_as(outputs['pred_boxes'])
            loss_bbox = F.l1_loss(pred, tgt)
            inter = (torch.min(pred[..., 2:], tgt[..., 2:])).prod(-1)
            loss_giou = (1 - inter / (pred[..., 2:].prod(-1) + tgt[..., 2:].prod(-1) - inter + 1e-6)).mean()
            loss_ce = F.binary_cross_entropy_with_logits(outputs['pred_logits'], (pred - tgt).abs().sum(-1).lt(0.2).float())
            return ({'loss_ce': loss_ce, 'loss_bbox': loss_bbox, 'loss_giou': loss_giou},
                    {'loss_ce': 2.0, 'loss_bbox': 5.0, 'loss_giou': 2.0})


class DiffusionTrackActor:
    def __init__(self, net, settings):
        self.net = net
        self.settings = settings

    def __call__(self, data):
        outputs, new_targets = self.forward_pass(data)
        loss, status = self.compute_losses(outputs, new_targets)
        return loss, status

    def train(self, mode=True):
        self.net.train(mode)

    def forward_pass(self, data):
        n, b, _, img_h, img_w = data['search_images'].shape
        search_img = data['search_images'].view(-1, *data['search_images'].shape[2:])
        search_list = search_img.split(b, dim=0)
        template_img = data['template_images'].view(-1, *data['template_images'].shape[2:])
        template_list = template_img.split(b, dim=0)
        feature_xz = self.net(images_list=template_list + search_list, mode='encoder')
        targets = data['search_anno'].permute(1, 0, 2).reshape(-1, data['search_anno'].shape[2])
        targets = box_xywh_to_xyxy(targets)
        targets = torch.max(targets, torch.tensor([0.]).to(targets))
        targets = torch.min(targets, torch.tensor([1.]).to(targets))
        targets = box_xyxy_to_cxcywh(targets)
        new_targets, diffused_boxes, noises, ts = self.net(targets=targets, mode='prepare_target')
        hw = data['search_images'].size()
        images_whwh = torch.tensor([[hw[-1], hw[-1], hw[-1], hw[-1]]], device=diffused_boxes.device)
        diffused_boxes = diffused_boxes * images_whwh[:, None, :]
        outputs = self.net(xz=feature_xz, boxes=diffused_boxes, t=ts, mode="decoder")
        return outputs, new_targets

    def compute_losses(self, outputs, new_targets, return_status=True):
        loss_dict, weight_dict = self.net(outputs=outputs, new_targets=new_targets, mode='compute_loss')
        new_loss_dict = {}
        for k in loss_dict.keys():
            if k in weight_dict:
                new_loss_dict[k] = loss_dict[k] * weight_dict[k]
        losses = sum(new_loss_dict.values())
        status = loss_dict.copy()
        status['total_loss'] = losses.clone().detach().item()
        if return_status:
            return losses, status
        else:
            return losses


class LTRTrainer:
    def __init__(self, actor, loaders, optimizer, settings, lr_scheduler=None):
        self.actor, self.loaders, self.optimizer = actor, loaders, optimizer
        self.settings, self.lr_scheduler = settings, lr_scheduler
        self.epoch = 0
        self.stats = OrderedDict({loader.name: None for loader in self.loaders})

    def cycle_dataset(self, loader):
        self.actor.train(loader.training)
        torch.set_grad_enabled(loader.training)
        for i, data in enumerate(loader, 1):
            data['epoch'] = self.epoch
            data['settings'] = self.settings
            loss, stats = self.actor(data)
            if loader.training:
                self.optimizer.zero_grad()
                loss.backward()
                if self.settings.grad_clip_norm > 0:
                    torch.nn.utils.clip_grad_norm_(self.actor.net.parameters(), self.settings.grad_clip_norm)
                self.optimizer.step()
            batch_size = data['template_images'].shape[loader.stack_dim]
            self._update_stats(stats, batch_size, loader)
            self._print_stats(i, loader, batch_size)

    def train_epoch(self):
        for loader in self.loaders:
            if self.epoch % loader.epoch_interval == 0:
                self.cycle_dataset(loader)
        self._stats_new_epoch()

    def _update_stats(self, new_stats, batch_size, loader):
        if loader.name not in self.stats.keys() or self.stats[loader.name] is None:
            self.stats[loader.name] = OrderedDict({name: AverageMeter() for name in new_stats.keys()})
        for name, val in new_stats.items():
            if name not in self.stats[loader.name].keys():
                self.stats[loader.name][name] = AverageMeter()
            self.stats[loader.name][name].update(val, batch_size)

    def _print_stats(self, i, loader, batch_size):
        if i % self.settings.print_interval == 0 or i == loader.__len__():
            print_str = '[%s: %d, %d / %d] ' % (loader.name, self.epoch, i, loader.__len__())
            for name, val in self.stats[loader.name].items():
                if hasattr(val, 'avg'):
                    print_str += '%s: %.5f  ,  ' % (name, val.avg)
            print(print_str[:-5])

    def _stats_new_epoch(self):
        for loader in self.loaders:
            if loader.training:
                lr_list = self.lr_scheduler.get_last_lr()
                for i, lr in enumerate(lr_list):
                    var_name = 'LearningRate/group{}'.format(i)
                    if var_name not in self.stats[loader.name].keys():
                        self.stats[loader.name][var_name] = StatValue()
                    self.stats[loader.name][var_name].update(lr)
        for loader_stats in self.stats.values():
            if loader_stats is None:
                continue
            for stat_value in loader_stats.values():
                if hasattr(stat_value, 'new_epoch'):
                    stat_value.new_epoch()


class LTRLoader(list):
    def __init__(self, name, batches, training=True, stack_dim=1, epoch_interval=1):
        super().__init__(batches)
        self.name, self.training, self.stack_dim, self.epoch_interval = name, training, stack_dim, epoch_interval


class Settings:
    print_interval = 10
    grad_clip_norm = 0.1


torch.manual_seed(0)
batches = []
for _ in range(25):
    xy = torch.rand(1, 4, 2) * 0.5
    batches.append({'template_images': torch.randn(1, 4, 3, 32, 32), 'search_images': torch.randn(1, 4, 3, 32, 32),
                    'search_anno': torch.cat([xy, 0.2 + torch.rand(1, 4, 2) * 0.3], dim=-1)})
net = DiffusionTrackNet()
actor = DiffusionTrackActor(net, Settings())
optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4, weight_decay=1e-4)
lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)
trainer = LTRTrainer(actor, [LTRLoader('train', batches)], optimizer, Settings(), lr_scheduler)
for epoch in range(1, 4):
    trainer.epoch = epoch
    trainer.train_epoch()
    lr_scheduler.step()
