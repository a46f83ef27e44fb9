# Source: https://github.com/IDEA-Research/DN-DETR/issues/19
#   code: engine.py (train_one_epoch) and util/misc.py at commit 206fa267
# Adapted: the DN-DETR model, its Hungarian-matching SetCriterion and the COCO loader
#   replaced by a small conv + query model, a criterion with the same loss_dict/weight_dict
#   interface and random images with 4 boxes each; MetricLogger reduced to the methods used;
#   no distributed run (reduce_dict returns its input, as with one process); cuda -> cpu;
#   1 epoch of 30 batches; args from a Namespace with amp=False (the default).
import math
import sys
from argparse import Namespace
from collections import defaultdict, deque
from typing import Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmoothedValue(object):
    def __init__(self, window_size=20, fmt=None):
        self.deque = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0
        self.fmt = fmt

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def global_avg(self):
        return self.total / self.count


class MetricLogger(object):
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def add_meter(self, name, meter):
        self.meters[name] = meter

    def synchronize_between_processes(self):
        pass

    def __str__(self):
        return self.delimiter.join("{}: {:.4f}".format(k, m.global_avg)
                                   for k, m in self.meters.items() if m.count > 0)

    def log_every(self, iterable, print_freq, header=None, logger=None):
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0:
                print(header, i, str(self))


def reduce_dict(input_dict, average=True):
    return input_dict


class TinyDETR(nn.Module):
    def __init__(self, num_classes=5, num_queries=10, hidden_dim=32):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, hidden_dim, 3, stride=4, padding=1), nn.ReLU(),
                                      nn.Conv2d(hidden_dim, hidden_dim, 3, stride=2, padding=1))
        self.query_embed = nn.Embedding(num_queries, hidden_dim)
        self.attn = nn.MultiheadAttention(hidden_dim, 4, batch_first=True)
        self.class_embed = nn.Linear(hidden_dim, num_classes + 1)
        self.bbox_embed = nn.Linear(hidden_dim, 4)

    def forward(self, samples):
        src = self.backbone(samples).flatten(2).transpose(1, 2)
        tgt = self.query_embed.weight.unsqueeze(0).repeat(samples.shape[0], 1, 1)
        hs, _ = self.attn(tgt, src, src)
        return {'pred_logits': self.class_embed(hs), 'pred_boxes': self.bbox_embed(hs).sigmoid()}


class SetCriterion(nn.Module):
    def __init__(self, num_classes, weight_dict):
        super().__init__()
        self.num_classes = num_classes
        self.weight_dict = weight_dict

    def forward(self, outputs, targets):
        logits = outputs['pred_logits']
        target_classes = torch.full(logits.shape[:2], self.num_classes, dtype=torch.int64)
        for b, t in enumerate(targets):
            target_classes[b, :len(t['labels'])] = t['labels']
        loss_ce = F.cross_entropy(logits.transpose(1, 2), target_classes)
        src_boxes = torch.cat([outputs['pred_boxes'][b, :len(t['boxes'])] for b, t in enumerate(targets)])
        tgt_boxes = torch.cat([t['boxes'] for t in targets])
        loss_bbox = F.l1_loss(src_boxes, tgt_boxes)
        with torch.no_grad():
            class_error = 100 - (logits.argmax(-1) == target_classes).float().mean() * 100
        return {'loss_ce': loss_ce, 'loss_bbox': loss_bbox, 'class_error': class_error}


def train_one_epoch(model: torch.nn.Module, criterion: torch.nn.Module,
                    data_loader: Iterable, optimizer: torch.optim.Optimizer,
                    device: torch.device, epoch: int, max_norm: float = 0,
                    wo_class_error=False, lr_scheduler=None, args=None, logger=None, ema_m=None):
    scaler = torch.amp.GradScaler('cpu', enabled=args.amp)

    try:
        need_tgt_for_training = args.use_dn
    except:
        need_tgt_for_training = False

    model.train()
    criterion.train()
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter('lr', SmoothedValue(window_size=1, fmt='{value:.6f}'))
    if not wo_class_error:
        metric_logger.add_meter('class_error', SmoothedValue(window_size=1, fmt='{value:.2f}'))
    header = 'Epoch: [{}]'.format(epoch)
    print_freq = 10

    _cnt = 0
    for samples, targets in metric_logger.log_every(data_loader, print_freq, header, logger=logger):

        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]

        with torch.autocast('cpu', enabled=args.amp):
            if need_tgt_for_training:
                outputs, mask_dict = model(samples, dn_args=(targets, args.scalar, args.label_noise_scale,
                                                             args.box_noise_scale, args.num_patterns))
                loss_dict = criterion(outputs, targets, mask_dict)
            else:
                outputs = model(samples)
                loss_dict = criterion(outputs, targets)
            weight_dict = criterion.weight_dict
            losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)


        # reduce losses over all GPUs for logging purposes
        loss_dict_reduced = reduce_dict(loss_dict)
        loss_dict_reduced_unscaled = {f'{k}_unscaled': v
                                      for k, v in loss_dict_reduced.items()}
        loss_dict_reduced_scaled = {k: v * weight_dict[k]
                                    for k, v in loss_dict_reduced.items() if k in weight_dict}
        losses_reduced_scaled = sum(loss_dict_reduced_scaled.values())

        loss_value = losses_reduced_scaled.item()

        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            print(loss_dict_reduced)
            sys.exit(1)


        # amp backward function
        if args.amp:
            optimizer.zero_grad()
            scaler.scale(losses).backward()
            if max_norm > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            # original backward function
            losses.backward()
            if max_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()


        metric_logger.update(loss=loss_value, **loss_dict_reduced_scaled, **loss_dict_reduced_unscaled)
        if 'class_error' in loss_dict_reduced:
            metric_logger.update(class_error=loss_dict_reduced['class_error'])
        metric_logger.update(lr=optimizer.param_groups[0]["lr"])

        _cnt += 1
        if args.debug:
            if _cnt % 15 == 0:
                print("BREAK!"*5)
                break


    # gather the stats from all processes
    metric_logger.synchronize_between_processes()
    print("Averaged stats:", metric_logger)
    resstat = {k: meter.global_avg for k, meter in metric_logger.meters.items() if meter.count > 0}
    if getattr(criterion, 'loss_weight_decay', False):
        resstat.update({f'weight_{k}': v for k,v in criterion.weight_dict.items()})
    return resstat


def make_loader(n_batches, batch_size=4, num_classes=5):
    batches = []
    for _ in range(n_batches):
        samples = torch.randn(batch_size, 3, 64, 64)
        targets = [{'labels': torch.randint(0, num_classes, (4,)), 'boxes': torch.rand(4, 4)}
                   for _ in range(batch_size)]
        batches.append((samples, targets))
    return batches


if __name__ == '__main__':
    torch.manual_seed(42)
    args = Namespace(amp=False, use_dn=False, debug=False, clip_max_norm=0.1, lr=1e-4, weight_decay=1e-4)
    device = torch.device('cpu')
    model = TinyDETR()
    criterion = SetCriterion(5, {'loss_ce': 1, 'loss_bbox': 5})
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    data_loader_train = make_loader(30)
    train_stats = train_one_epoch(model, criterion, data_loader_train, optimizer, device, 0,
                                  args.clip_max_norm, args=args)
    print(train_stats['loss'])
