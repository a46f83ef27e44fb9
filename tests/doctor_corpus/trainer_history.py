import logging

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger(__name__)


class Trainer:
    def __init__(self, model, optimizer, loss_fn, log_every=10):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.log_every = log_every
        self.history = []
        self.global_step = 0

    def training_step(self, batch):
        x, y = batch
        out = self.model(x)
        loss = self.loss_fn(out, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.history.append(out)
        return loss.item()

    def fit(self, loader, epochs=1):
        for epoch in range(epochs):
            for batch in loader:
                loss = self.training_step(batch)
                self.global_step += 1
                if self.global_step % self.log_every == 0:
                    print(f"epoch {epoch} step {self.global_step} loss {loss:.6f}")


def main():
    torch.manual_seed(0)
    x = torch.randn(2048, 128)
    y = torch.sin(x @ torch.randn(128, 1024))
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=False)
    model = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 1024))
    trainer = Trainer(model, torch.optim.RMSprop(model.parameters(), lr=1e-3), nn.MSELoss())
    trainer.fit(loader, epochs=2)


if __name__ == "__main__":
    main()
