# Source: https://github.com/huggingface/transformers/issues/1134
#   code: WarmupCosineWithHardRestartsSchedule from pytorch_transformers/optimization.py
#   (pytorch-transformers 1.1, the version the issue was filed against)
# Adapted: the schedule class kept as it was and defined in the script instead of imported
#   from pytorch_transformers (not installed); the reporter's example kept as posted, with
#   torch.nn.Linear(2000, 2000) instead of (10000, 10000), `.cuda()` dropped (cpu) and
#   `while True` -> 60 folds, printing every 10; the reporter's comments (they named the
#   problem) and commented-out alternatives dropped; seeded.
import math

import torch
from torch.optim.lr_scheduler import LambdaLR


class WarmupCosineWithHardRestartsSchedule(LambdaLR):
    """ Linear warmup and then cosine cycles with hard restarts.
        Linearly increases learning rate from 0 to 1 over `warmup_steps` training steps.
        If `cycles` (default=1.) is different from default, learning rate follows `cycles` times a cosine decaying
        learning rate (with hard restarts).
    """
    def __init__(self, optimizer, warmup_steps, t_total, cycles=1., last_epoch=-1):
        self.warmup_steps = warmup_steps
        self.t_total = t_total
        self.cycles = cycles
        super(WarmupCosineWithHardRestartsSchedule, self).__init__(optimizer, self.lr_lambda, last_epoch=last_epoch)

    def lr_lambda(self, step):
        if step < self.warmup_steps:
            return float(step) / float(max(1, self.warmup_steps))
        # progress after warmup
        progress = float(step - self.warmup_steps) / float(max(1, self.t_total - self.warmup_steps))
        if progress >= 1.0:
            return 0.0
        return max(0.0, 0.5 * (1. + math.cos(math.pi * ((float(self.cycles) * progress) % 1.0))))


torch.manual_seed(0)
fold = 0
while fold < 60:
    net = torch.nn.Linear(2000, 2000)
    net = net

    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    scheduler = WarmupCosineWithHardRestartsSchedule(optimizer, 1, 1000)

    del net, optimizer, scheduler
    if fold % 10 == 0:
        print(fold)
    fold += 1
