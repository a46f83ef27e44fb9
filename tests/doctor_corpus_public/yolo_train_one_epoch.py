# Source: https://github.com/MultimediaTechLab/YOLO/pull/83
#   code: yolo/tools/solver.py (ModelTrainer.train_one_batch, train_one_epoch) and
#   yolo/tools/loss_functions.py (DualLoss) at commit dea5a8a^ (the parent of the fix)
# Adapted: the YOLO model, Vec2Box, YOLOLoss, the optimizer wrapper and the progress logger
#   replaced by small stand-ins with the same call signatures (a two-head conv net, a box/
#   DFL/BCE loss triple); random images and targets; cpu; 2 epochs of 16 batches.
from collections import defaultdict
from typing import Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.cuda.amp import GradScaler, autocast


class YOLOLoss:
    def __init__(self, loss_cfg, vec2box, class_num=8, reg_max=16):
        self.class_num = class_num

    def __call__(self, predicts, targets):
        cls, box = predicts
        target_cls, target_box = targets[..., 0].long(), targets[..., 1:]
        iou = 1 - F.cosine_similarity(box, target_box, dim=-1).mean()
        dfl = F.smooth_l1_loss(box, target_box) + (box - target_box).abs().mean()
        bce = F.binary_cross_entropy_with_logits(cls, F.one_hot(target_cls, self.class_num).float())
        return iou, dfl, bce


class DualLoss:
    def __init__(self, cfg, vec2box) -> None:
        loss_cfg = cfg["loss"]
        self.loss = YOLOLoss(loss_cfg, vec2box, class_num=cfg["class_num"], reg_max=16)

        self.aux_rate = loss_cfg["aux"]

        self.iou_rate = loss_cfg["objective"]["BoxLoss"]
        self.dfl_rate = loss_cfg["objective"]["DFLoss"]
        self.cls_rate = loss_cfg["objective"]["BCELoss"]

    def __call__(
        self, aux_predicts: List[Tensor], main_predicts: List[Tensor], targets: Tensor
    ) -> Tuple[Tensor, Dict[str, Tensor]]:
        # TODO: Need Refactor this region, make it flexible!
        aux_iou, aux_dfl, aux_cls = self.loss(aux_predicts, targets)
        main_iou, main_dfl, main_cls = self.loss(main_predicts, targets)

        loss_dict = {
            "BoxLoss": self.iou_rate * (aux_iou * self.aux_rate + main_iou),
            "DFLoss": self.dfl_rate * (aux_dfl * self.aux_rate + main_dfl),
            "BCELoss": self.cls_rate * (aux_cls * self.aux_rate + main_cls),
        }
        loss_sum = sum(list(loss_dict.values())) / len(loss_dict)
        return loss_sum, loss_dict


class TinyYOLO(nn.Module):
    def __init__(self, class_num=8, anchors=64):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.SiLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.SiLU())
        self.aux = nn.Conv2d(32, class_num + 4, 1)
        self.main = nn.Conv2d(32, class_num + 4, 1)

    def forward(self, x):
        f = self.backbone(x)
        return {"AUX": self.aux(f), "Main": self.main(f)}


class Vec2Box:
    def __init__(self, class_num=8):
        self.class_num = class_num

    def __call__(self, predicts):
        flat = predicts.flatten(2).transpose(1, 2)
        return flat[..., :self.class_num], flat[..., self.class_num:]


class YOLOOptimizer(torch.optim.SGD):
    def next_epoch(self, batch_num):
        self.batch_num = batch_num

    def next_batch(self):
        pass


class ProgressLogger:
    def one_batch(self, loss_dict):
        self.last = {name: float(value) for name, value in loss_dict.items()}


class ModelTrainer:
    def __init__(self, cfg, model, vec2box, progress, device, use_ddp: bool):
        self.model = model
        self.use_ddp = use_ddp
        self.vec2box = vec2box
        self.device = device
        self.optimizer = YOLOOptimizer(model.parameters(), lr=0.01, momentum=0.937)
        self.scheduler = None
        self.loss_fn = DualLoss(cfg, vec2box)
        self.progress = progress
        self.num_epochs = cfg["epoch"]
        self.scaler = GradScaler()

    def train_one_batch(self, images: Tensor, targets: Tensor):
        images, targets = images.to(self.device), targets.to(self.device)
        self.optimizer.zero_grad()

        with autocast():
            predicts = self.model(images)
            aux_predicts = self.vec2box(predicts["AUX"])
            main_predicts = self.vec2box(predicts["Main"])
            loss, loss_item = self.loss_fn(aux_predicts, main_predicts, targets)

        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()

        return loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(lambda: torch.tensor(0.0, device=self.device))
        total_samples = 0
        self.optimizer.next_epoch(len(dataloader))
        for batch_size, images, targets, *_ in dataloader:
            self.optimizer.next_batch()
            loss_each = self.train_one_batch(images, targets)

            for loss_name, loss_val in loss_each.items():
                if self.use_ddp:  # collecting loss for each batch
                    distributed.all_reduce(loss_val, op=distributed.ReduceOp.AVG)
                total_loss[loss_name] += loss_val * batch_size
            total_samples += batch_size
            self.progress.one_batch(loss_each)

        for loss_val in total_loss.values():
            loss_val /= total_samples

        if self.scheduler:
            self.scheduler.step()

        return total_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    cfg = {"epoch": 2, "class_num": 8,
           "loss": {"aux": 0.25, "objective": {"BoxLoss": 7.5, "DFLoss": 1.5, "BCELoss": 0.5}}}
    trainer = ModelTrainer(cfg, TinyYOLO(), Vec2Box(), ProgressLogger(), torch.device("cpu"), use_ddp=False)
    dataloader = []
    for _ in range(16):
        targets = torch.cat([torch.randint(0, 8, (8, 64, 1)).float(), torch.rand(8, 64, 4)], dim=-1)
        dataloader.append((8, torch.rand(8, 3, 32, 32), targets))
    for epoch in range(trainer.num_epochs):
        total_loss = trainer.train_one_epoch(dataloader)
        print(epoch, {name: round(float(value), 4) for name, value in total_loss.items()})
