import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                      nn.Linear(512, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
train = [(torch.randn(32, 64), torch.randn(32, 1)) for _ in range(6)]
val = [(torch.randn(128, 64), torch.randn(128, 1)) for _ in range(12)]


def validate():
    model.eval()
    with torch.no_grad():
        preds = [model(x) for x, _ in val]
    model.train()
    return sum(nn.functional.mse_loss(p, y).item() for p, (_, y) in zip(preds, val)) / len(val)


for epoch in range(4):
    for x, y in train:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, round(validate(), 4))
