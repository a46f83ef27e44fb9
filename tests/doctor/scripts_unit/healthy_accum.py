import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(1024, 32), torch.randn(1024, 1))
loader = DataLoader(data, batch_size=16, shuffle=True)
model = nn.GRU(32, 64, batch_first=True)
head = nn.Linear(64, 1)
opt = torch.optim.RMSprop(list(model.parameters()) + list(head.parameters()), lr=1e-3)
hidden = None
accum = 4
for i, (x, y) in enumerate(loader):
    out, hidden = model(x.unsqueeze(1), hidden)
    hidden = hidden.detach()
    loss = nn.functional.mse_loss(head(out[:, -1]), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        _ = head(out[:, -1])
print(f"{loss.item():.6f}")
