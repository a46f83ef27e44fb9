# Source: https://github.com/ultralytics/ultralytics/pull/25315
#   code: ModelEMA (ultralytics/utils/torch_utils.py) with the pull request's update(): the EMA
#   and model state_dict tensors are collected into lists and updated with one
#   torch._foreach_lerp_, without the .detach() the old loop applied to the model's tensors
#   (the reviewer's concern; the author answers that state_dict() already returns detached
#   tensors)
# Adapted: the YOLO model and trainer replaced by a small convolutional network trained with
#   SGD on 40 batches of 8 random 3x32x32 images with random regression targets, the EMA
#   updated after every optimizer step as the trainer does, and evaluated every 10 steps;
#   unwrap_model reduced to the DataParallel check; cpu, seeded.
import math
from copy import deepcopy

import torch
import torch.nn as nn


def unwrap_model(m):
    return m.module if isinstance(m, (nn.DataParallel, nn.parallel.DistributedDataParallel)) else m


class ModelEMA:
    def __init__(self, model, decay=0.9999, tau=2000, updates=0):
        self.ema = deepcopy(unwrap_model(model)).eval()  # FP32 EMA
        self.updates = updates  # number of EMA updates
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))  # decay exponential ramp
        for p in self.ema.parameters():
            p.requires_grad_(False)
        self.enabled = True

    def update(self, model):
        if self.enabled:
            self.updates += 1
            d = self.decay(self.updates)

            msd = unwrap_model(model).state_dict()  # model state_dict
            ema_v, model_v = [], []
            for k, v in self.ema.state_dict().items():
                if v.dtype.is_floating_point:  # true for FP16 and FP32
                    ema_v.append(v)
                    model_v.append(msd[k])
            torch._foreach_lerp_(ema_v, model_v, 1.0 - d)


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.SiLU(),
                      nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.SiLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
ema = ModelEMA(model)
batches = [(torch.randn(8, 3, 32, 32), torch.randn(8, 4)) for _ in range(40)]

for i, (imgs, targets) in enumerate(batches):
    preds = model(imgs)
    loss = nn.functional.mse_loss(preds, targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    ema.update(model)
    if (i + 1) % 10 == 0:
        with torch.no_grad():
            val = nn.functional.mse_loss(ema.ema(imgs), targets)
        print(f"step {i + 1} loss {loss.item():.4f} ema loss {val.item():.4f}")
