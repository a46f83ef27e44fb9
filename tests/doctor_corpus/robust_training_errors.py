import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

logging.basicConfig(level=logging.ERROR, format="%(message)s")
log = logging.getLogger("train")


class NonFiniteLoss(ValueError):
    pass


def check_finite(loss, step):
    if not torch.isfinite(loss):
        raise NonFiniteLoss(f"non-finite loss at step {step}")


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        self.skipped = 0

    def step(self, step, x, y):
        hidden = self.model[0](x)
        out = self.model[1:](hidden)
        loss = F.mse_loss(out, y)
        error = None
        try:
            check_finite(loss * (step % 3 or float("nan")), step)
        except NonFiniteLoss as exc:
            error = exc
        if error is not None:
            self.skipped += 1
            log.debug("skipped batch: %s", error)
            return None
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(3840, 128)
    y = torch.randn(3840, 128)
    loader = DataLoader(TensorDataset(x, y), batch_size=64)
    trainer = Trainer(nn.Sequential(nn.Linear(128, 1024), nn.ReLU(), nn.Linear(1024, 128)))
    for step, (xb, yb) in enumerate(loader):
        loss = trainer.step(step, xb, yb)
        if loss is not None and step % 10 == 1:
            print(f"step {step} loss {loss:.6f} skipped {trainer.skipped}")


if __name__ == "__main__":
    main()
