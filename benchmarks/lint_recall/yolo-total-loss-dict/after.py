# Source: https://github.com/MultimediaTechLab/YOLO/blob/17eb6b7ff8cdd02f777fba6da66165c049802d7f/yolo/tools/solver.py
# Adapted excerpt, after the fix https://github.com/MultimediaTechLab/YOLO/commit/17eb6b7ff8cdd02f777fba6da66165c049802d7f
# (trimmed to the code the fix touches; omitted lines are marked).
from collections import defaultdict
# ... (lines 7-9 omitted)
import torch
# ... (lines 11-12 omitted)
from torch import Tensor, distributed
from torch.cuda.amp import GradScaler, autocast
# ... (lines 15-36 omitted)
class ModelTrainer:
    def __init__(self, cfg: Config, model: YOLO, vec2box: Vec2Box, progress: ProgressLogger, device, use_ddp: bool):
        ...  # (lines 39-45 omitted)
        self.loss_fn = create_loss_function(cfg, vec2box)
    # ... (lines 47-68 omitted)
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
                total_loss[loss_name] += float(loss_val * batch_size)
            total_samples += batch_size
            self.progress.one_batch(loss_each)

        for loss_val in total_loss.values():
            loss_val /= total_samples

        if self.scheduler:
            self.scheduler.step()

        return total_loss
