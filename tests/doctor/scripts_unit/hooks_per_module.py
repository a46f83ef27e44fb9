import torch
from torch import nn


class Tracer:
    """Records the output shape of every layer; built again for each batch."""

    def __init__(self, model):
        self.model = model
        self.shapes = []
        for _, module in self.model.named_modules():
            module.register_forward_pre_hook(lambda mod, inp: None)
            module.register_forward_hook(lambda mod, inp, out: self.shapes.append(tuple(out.shape)))

    def __call__(self, x):
        return self.model(x)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(24):
    tracer = Tracer(model)
    loss = tracer(torch.randn(16, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"{loss.item():.6f}")
