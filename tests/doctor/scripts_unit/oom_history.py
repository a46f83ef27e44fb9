"""A trainer that keeps every step's outputs, with their graphs, in a dict of its history,
then asks for more memory than the machine has (an out-of-memory error)."""

import torch


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                         torch.nn.Linear(1024, 256))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.history = {"outputs": []}

    def step(self, x):
        out = self.model(x)
        loss = out.square().mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.history["outputs"].append(out)


def main():
    trainer = Trainer()
    for _ in range(16):
        trainer.step(torch.randn(512, 256))
    grid = torch.empty(1 << 62, dtype=torch.uint8)  # far more than any machine has
    print(grid.shape)


if __name__ == "__main__":
    main()
