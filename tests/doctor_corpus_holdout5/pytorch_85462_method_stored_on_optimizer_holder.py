# Source: https://github.com/pytorch/pytorch/pull/85462
# Adapted: the reproduction's class X kept as posted, without its two comments (they named
#   the problem) and without the commented-out alternative line; transformers (not installed)
#   is replaced by a stub DetrForObjectDetection.from_pretrained returning a small model with
#   about 10 MiB of parameters; the stored copy of the pull request stops inside test(), so
#   test() is completed as the description says ("after initializing ... the model, optimizer
#   and scheduler are out of scope"): it builds the model, an SGD optimizer and an X holding
#   it, runs one step and returns; test() is called 40 times; cpu; seeded.
import torch
import torch.nn as nn


# ---- stub for transformers (not installed; same call) ----
class DetrForObjectDetection(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 64, 3, 2, 1), nn.ReLU(), nn.Conv2d(64, 256, 3, 2, 1))
        self.transformer = nn.Sequential(nn.Linear(256, 2048), nn.ReLU(), nn.Linear(2048, 256))
        self.class_embed = nn.Linear(256, 92)

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def forward(self, pixel_values):
        x = self.backbone(pixel_values).flatten(2).transpose(1, 2)
        return self.class_embed(self.transformer(x))
# ---- end of stub ----


class X:
    def __init__(self, optimizer):
        self.optimizer = optimizer

        self.func = self.dummy

    def dummy(self, x):
        return 1.

def test():
    model = DetrForObjectDetection.from_pretrained('facebook/detr-resnet-50')
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = X(optimizer)
    loss = model(torch.randn(1, 3, 32, 32)).mean() * x.func(None)
    loss.backward()
    optimizer.step()

torch.manual_seed(0)
for i in range(40):
    test()
    if i % 10 == 0:
        print(i)
