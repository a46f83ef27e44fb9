import torch
from torch import nn


class AccuracyCallback:
    def __init__(self):
        self.preds = []

    def on_epoch_begin(self):
        self.preds = []

    def on_batch_end(self, y_pred):
        self.preds.append(y_pred)

    def on_epoch_end(self, targets):
        if self.preds:
            hits = (torch.cat(self.preds).argmax(1) == targets).float()
            print(f"acc {hits.mean().item():.4f}")


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    callback = AccuracyCallback()
    train = [(torch.randn(32, 64), torch.randint(0, 4, (32,))) for _ in range(8)]
    valid = [(torch.randn(32, 64), torch.randint(0, 4, (32,))) for _ in range(24)]
    targets = torch.cat([y for _, y in valid])
    for epoch in range(3):
        callback.on_epoch_begin()
        model.train()
        for x, y in train:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        for x, y in valid:  # grad enabled: each kept prediction keeps its graph
            y_pred = model(x)
            callback.on_batch_end(y_pred)
        callback.on_epoch_end(targets)


if __name__ == "__main__":
    main()
