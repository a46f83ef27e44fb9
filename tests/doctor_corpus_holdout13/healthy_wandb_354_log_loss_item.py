# Source: https://github.com/wandb/wandb/issues/354
#   code: the comparison of wandb.log({'loss': loss}) with wandb.log({'loss':
#   loss.item()}) in a PyTorch training loop; this is the loop that logs loss.item()
# Adapted: wandb is not installed and nothing can be sent: a stand-in `wandb` object with the
#   same init/log/summary interface keeps every logged row in memory (a history list and a
#   summary dict, as the run's local history does); the reporter's model and data are not in
#   the issue: a small CNN on random 1x28x28 images, batches of 64, 5 epochs of 50 batches.
import torch
import torch.nn as nn
import torch.nn.functional as F


class _Run:
    def __init__(self):
        self.history = []
        self.summary = {}
        self._step = 0

    def log(self, row, step=None):
        self._step = self._step + 1 if step is None else step
        row = dict(row, _step=self._step)
        self.history.append(row)
        self.summary.update(row)


class _Wandb:
    run = None

    def init(self, project=None, config=None):
        self.run = _Run()
        self.config = dict(config or {})
        return self.run

    def log(self, row, step=None):
        self.run.log(row, step)


wandb = _Wandb()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


torch.manual_seed(0)
wandb.init(project="leak-test", config={"lr": 0.01, "epochs": 5})
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
data = [(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))) for _ in range(50)]
for epoch in range(5):
    for batch_idx, (inputs, targets) in enumerate(data):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = F.cross_entropy(outputs, targets)
        loss.backward()
        optimizer.step()
        wandb.log({"loss": loss.item(), "epoch": epoch})
    print(epoch, wandb.run.summary["loss"])
