"""Every fit() builds an Extractor that registers a forward hook on a layer of the shared
model and never removes it: the hooks of earlier fits keep appending every forward's
activations, with their graphs (fits of 20, 24 and 4 steps: the first fit's hook grows
most)."""
import torch
import torch.nn as nn


class Keep:
    def __init__(self):
        self.outputs = []

    def __call__(self, module, inputs, output):
        self.outputs.append(output)

    def clear(self):
        self.outputs = []


class Extractor:
    def __init__(self, model, names):
        self.keep = Keep()
        for name in names:
            layer = getattr(model, name)
            layer.register_forward_hook(self.keep)

    def run(self, model, x):
        self.keep.clear()
        model(x)
        return self.keep.outputs


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 8)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def fit(model, steps):
    extractor = Extractor(model, ["fc3"])
    x = torch.randn(4, 64, requires_grad=True)
    opt = torch.optim.SGD([x], lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        feats = extractor.run(model, x)
        sum(f.pow(2).sum() for f in feats).backward()
        opt.step()


torch.manual_seed(0)
model = Net()
for steps in (20, 24, 4):
    fit(model, steps)
