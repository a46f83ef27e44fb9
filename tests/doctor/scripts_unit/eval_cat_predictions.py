import torch
from torch import nn


def evaluate(model, batches):
    model.eval()
    preds = None
    with torch.no_grad():
        for x in batches:
            out = model(x)
            preds = out if preds is None else torch.cat((preds, out))  # the whole set, grown
    model.train()
    return preds.argmax(1).float().mean().item()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4096))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
train = [(torch.randn(32, 64), torch.randint(0, 4096, (32,))) for _ in range(8)]
val = [torch.randn(64, 64) for _ in range(30)]
for epoch in range(3):
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, evaluate(model, val))
