import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 64)
        self.wide = nn.Linear(64, 1024)
        self.out = nn.Linear(1024, 8)

    def forward(self, x):
        x = torch.relu(self.inp(x))
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            x = torch.relu(self.wide(x))
        return self.out(x)


torch.manual_seed(0)
block = Block()
opt = torch.optim.SGD(block.parameters(), lr=0.01)
for step in range(30):
    batch = torch.randn(64, 16, requires_grad=True)
    loss = checkpoint(block, batch, use_reentrant=False).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"{loss.item():.6f}")
