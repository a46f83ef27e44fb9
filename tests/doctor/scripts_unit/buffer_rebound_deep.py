import torch
from torch import nn


class SparseNorm(nn.Module):
    def __init__(self, channels, momentum=0.05):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x):
        var = x.var(dim=(0, 2, 3))
        self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        return x / torch.sqrt(var[None, :, None, None] + 1e-5)


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, 16, 3, padding=1), SparseNorm(16), nn.ReLU()) for c in (3, 16))
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        return self.head(x.mean(dim=(2, 3)))


torch.manual_seed(0)
net = Backbone()
opt = torch.optim.SGD(net.parameters(), lr=1e-2)
for step in range(80):
    loss = net(torch.randn(4, 3, 16, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
