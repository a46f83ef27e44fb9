import json

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
        self.history = {"loss": [], "grad_norm": []}

    def fit(self, loader, epochs):
        for _ in range(epochs):
            for x, y in loader:
                out = self.model(x)
                loss = nn.functional.smooth_l1_loss(out, y)
                self.optimizer.zero_grad()
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
                self.optimizer.step()
                self.history["loss"].append(loss.item())
                self.history["grad_norm"].append(float(norm))


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(1280, 128)
    y = x[:, :32] * 2
    trainer = Trainer(nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 32)))
    trainer.fit(DataLoader(TensorDataset(x, y), batch_size=64), epochs=2)
    print(json.dumps({k: round(v[-1], 6) for k, v in trainer.history.items()}))
