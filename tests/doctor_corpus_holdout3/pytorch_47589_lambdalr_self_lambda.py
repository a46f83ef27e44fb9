# Source: https://github.com/pytorch/pytorch/issues/47589
# Adapted: `.to("cuda")` -> cpu, the shared layer Linear(1000, 1000) instead of
#   Linear(100, 100) (so each Adam state is visible), the endless `while True` loop bounded to
#   60 runs with a print every 20, seeded.
import torch

torch.manual_seed(0)
weight = torch.nn.Linear(1000, 1000).to("cpu")


class Foo:
    def __init__(self):
        self.lr = 1.0
        self.op = torch.optim.Adam(weight.parameters())
        self.sc = torch.optim.lr_scheduler.LambdaLR(self.op, lr_lambda=lambda s: self.lr)

    def run(self):
        loss = weight(torch.randn(32, 1000).to("cpu")).mean()
        self.op.zero_grad()
        loss.backward()
        self.sc.step()
        self.op.step()


i = 0
while i < 60:
    Foo().run()
    if i % 20 == 0:
        print(i, weight.weight.norm().item())
    i += 1
