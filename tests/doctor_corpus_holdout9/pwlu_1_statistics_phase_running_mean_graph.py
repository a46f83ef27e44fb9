# Source: https://github.com/MrGoriay/pwlu-pytorch/issues/1
#   code: PWLA2d of PWLA.py and setparams of utils.py at f230f62 (the state the issue reads):
#   in the statistics phase (mode 0) forward() folds x.mean and x.var into self.running_mean
#   and self.running_var without detaching x
# Adapted: the repository has no training script, so it is completed as the paper's two phases
#   it implements: a small 1D convolutional network with two PWLA2d activations trained with
#   Adam for 2 epochs in the statistics phase (mode 0), setparams applied to each activation,
#   then 1 epoch in mode 1; 30 batches of 16 random 4x128 sequences with 5 classes; cpu, seeded.
import torch
import torch.nn as nn


class PWLA2d(torch.nn.Module):
    def __init__(self, N=16, momentum=0.9):
        super(PWLA2d, self).__init__()
        self.N = N
        self.momentum = momentum
        self.Br = torch.nn.Parameter(torch.tensor(10.))
        self.Bl = torch.nn.Parameter(torch.tensor(-10.))
        self.register_buffer('running_mean', torch.zeros(1))
        self.register_buffer('running_var', torch.ones(1))
        self.Kl = torch.nn.Parameter(torch.tensor(0.))
        self.Kr = torch.nn.Parameter(torch.tensor(1.))
        self.Yidx = torch.nn.Parameter(nn.functional.relu(torch.linspace(self.Bl.item(), self.Br.item(), self.N + 1)))
        self.reset_parameters()

    def reset_parameters(self):
        self.running_mean.zero_()
        self.running_var.fill_(1)

    def forward(self, x, mode=0):
        if mode == 0:
            mean = x.mean([0, 1, -1])
            var = x.var([0, 1, -1])
            self.running_mean = (self.momentum * self.running_mean) + (1.0 - self.momentum) * mean
            self.running_var = (self.momentum * self.running_var) + (1.0 - self.momentum) * (x.shape[0] / (x.shape[0] - 1) * var)
            return nn.functional.relu(x)
        else:
            d = (self.Br - self.Bl) / self.N
            DATAind = torch.clamp(torch.floor((x - self.Bl.item()) / d), 0, self.N - 1)
            Bdata = self.Bl + DATAind * d
            maskBl = x < self.Bl
            maskBr = x >= self.Br
            maskOther = ~(maskBl + maskBr)
            Ydata = self.Yidx[DATAind.type(torch.int64)]
            Kdata = (self.Yidx[(DATAind).type(torch.int64) + 1] - self.Yidx[DATAind.type(torch.int64)]) / d
            return maskBl * ((x - self.Bl) * self.Kl + self.Yidx[0]) + maskBr * ((x - self.Br) * self.Kr + self.Yidx[-1]) + maskOther * ((x - Bdata) * Kdata + Ydata)


def setparams(act):
    act.Bl = torch.nn.Parameter(act.running_mean.detach() - 3 * act.running_var.detach())
    act.Br = torch.nn.Parameter(act.running_mean.detach() + 3 * act.running_var.detach())
    act.Yidx = torch.nn.Parameter(nn.functional.relu(torch.linspace(act.Bl.item(), act.Br.item(), act.N + 1)))
    return act


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(4, 32, 3, padding=1)
        self.act1 = PWLA2d()
        self.conv2 = nn.Conv1d(32, 32, 3, padding=1)
        self.act2 = PWLA2d()
        self.fc = nn.Linear(32, 5)

    def forward(self, x, mode=0):
        x = self.act1(self.conv1(x), mode)
        x = self.act2(self.conv2(x), mode)
        return self.fc(x.mean(-1))


torch.manual_seed(0)
net = Net()
batches = [(torch.randn(16, 4, 128), torch.randint(0, 5, (16,))) for _ in range(30)]
criterion = nn.CrossEntropyLoss()


def run_epoch(mode, optimizer):
    total = 0.0
    for x, y in batches:
        loss = criterion(net(x, mode), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
for epoch in range(2):
    print('phase I epoch', epoch, run_epoch(0, optimizer), net.act1.running_mean.item(), net.act1.running_var.item())

for act in (net.act1, net.act2):
    setparams(act)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
print('phase II', run_epoch(1, optimizer))
