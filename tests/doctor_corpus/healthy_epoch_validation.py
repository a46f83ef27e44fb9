import argparse
import copy
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset, random_split

logger = logging.getLogger("fit")


class Trainer:
    def __init__(self, model, optimizer, scheduler=None):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.best_state = None
        self.best_acc = -1.0

    def train_epoch(self, loader):
        self.model.train()
        for x, y in loader:
            self.optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        return loss.item()

    @torch.no_grad()
    def validate(self, loader):
        self.model.eval()
        outputs, targets = [], []
        for x, y in loader:
            outputs.append(self.model(x))
            targets.append(y)
        preds = torch.cat(outputs).argmax(1)
        acc = (preds == torch.cat(targets)).float().mean().item()
        if acc > self.best_acc:
            self.best_acc = acc
            self.best_state = copy.deepcopy(self.model.state_dict())
        return acc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(1000, 48)
    y = (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 1).long()
    train_set, val_set = random_split(TensorDataset(x, y), [640, 360],
                                      generator=torch.Generator().manual_seed(0))
    model = nn.Sequential(nn.Linear(48, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    trainer = Trainer(model, optimizer, torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.9))
    for epoch in range(args.epochs):
        loss = trainer.train_epoch(DataLoader(train_set, batch_size=64, shuffle=True))
        acc = trainer.validate(DataLoader(val_set, batch_size=120))
        print(f"epoch {epoch} loss {loss:.6f} val_acc {acc:.4f}")


if __name__ == "__main__":
    main()
