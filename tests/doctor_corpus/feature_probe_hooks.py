import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, 1024), nn.ReLU())
        self.head = nn.Linear(1024, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


def attach_feature_probe(layer, store):
    def probe(module, inputs, output):
        store.append(output.detach())
    return layer.register_forward_hook(probe)


def train(model, loader, optimizer):
    for step, (x, y) in enumerate(loader):
        features = []
        attach_feature_probe(model.encoder, features)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        sparsity = (features[0] == 0).float().mean().item()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.6f} sparsity {sparsity:.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(2560, 32)
    y = (x[:, 0] > 0).long()
    model = Net()
    train(model, DataLoader(TensorDataset(x, y), batch_size=64),
          torch.optim.SGD(model.parameters(), lr=0.1))
