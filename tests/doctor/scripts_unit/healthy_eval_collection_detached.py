import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
        self.head = nn.Linear(256, 4)

    def forward(self, x):
        return self.head(self.body(x))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(32, 64), torch.randint(0, 4, (32,))) for _ in range(20)]
for epoch in range(3):
    model.eval()
    feats = []
    for x, _ in data:
        feats.append(model.body(x).detach())
    centre = torch.cat(feats).mean(0).detach()
    model.train()
    for x, y in data:
        loss = F.cross_entropy(model(x), y) + 1e-3 * (model.body(x) - centre).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    correct = sum((model(x).argmax(1) == y).sum().item() for x, y in data)
    print(epoch, round(loss.item(), 4), correct)
