import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
outputs = []
for step in range(24):
    x = torch.randn(128, 64)
    y = torch.randint(0, 10, (128,))
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    outputs.append(logits)
print(f"{loss.item():.6f}")
