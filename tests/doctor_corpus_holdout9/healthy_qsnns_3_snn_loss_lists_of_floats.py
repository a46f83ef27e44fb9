# Source: https://github.com/jeshraghian/QSNNs/issues/3
#   code: evaluate() (evaluate.py), train() (dvs/train.py), test() (dvs/test.py) and Net
#   (dvs/Net.py, the full-precision branch) of the repository the issue reports on: the
#   reporter's memory grows over 70-85 epochs of the DVS runs, while train() keeps only
#   loss.item() and learning-rate floats in its lists and test() runs under torch.no_grad()
# Adapted: snntorch's Leaky neuron, fast_sigmoid surrogate, mse_count_loss and accuracy_rate
#   replaced by minimal stand-ins with the same interface; the DVSGesture loaders by lists of
#   20 training and 5 test batches of 8 random event frames (20 time steps, 2x32x32); pandas'
#   DataFrame.append replaced by list.extend/append; brevitas (quantized branch), early
#   stopping and csv saving dropped; config is a dict with the used keys (1 trial, 3 epochs);
#   cpu, seeded.
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class FastSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, slope):
        ctx.save_for_backward(input_)
        ctx.slope = slope
        return (input_ > 0).float()

    @staticmethod
    def backward(ctx, grad_output):
        (input_,) = ctx.saved_tensors
        return grad_output / (ctx.slope * torch.abs(input_) + 1.0) ** 2, None


def fast_sigmoid(slope=25):
    return lambda x: FastSigmoid.apply(x, slope)


class Leaky(nn.Module):
    def __init__(self, beta, threshold=1.0, spike_grad=None):
        super().__init__()
        self.beta, self.threshold, self.spike_grad = beta, threshold, spike_grad

    def init_leaky(self):
        return torch.zeros(0)

    def forward(self, input_, mem):
        if mem.numel() == 0:
            mem = torch.zeros_like(input_)
        reset = (mem - self.threshold > 0).float().detach()
        mem = self.beta * mem + input_ - reset * self.threshold
        spk = self.spike_grad(mem - self.threshold)
        return spk, mem


def mse_count_loss(correct_rate=1.0, incorrect_rate=0.0):
    def loss_fn(spk_out, targets):
        num_steps, _, num_outputs = spk_out.shape
        on_target = num_steps * correct_rate * F.one_hot(targets, num_outputs)
        off_target = num_steps * incorrect_rate * (1 - F.one_hot(targets, num_outputs))
        return F.mse_loss(spk_out.sum(0), (on_target + off_target).float()) / num_steps
    return loss_fn


def accuracy_rate(spk_out, targets):
    return np.mean((targets == spk_out.sum(dim=0).argmax(1)).detach().cpu().numpy())


class Net(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.thr = config['threshold']
        self.slope = config['slope']
        self.beta = config['beta']
        self.num_steps = config['num_steps']
        self.batch_norm = config['batch_norm']
        self.p1 = config['dropout']
        self.spike_grad = fast_sigmoid(self.slope)
        self.conv1 = nn.Conv2d(2, 16, 5, bias=False)
        self.conv1_bn = nn.BatchNorm2d(16)
        self.lif1 = Leaky(self.beta, threshold=self.thr, spike_grad=self.spike_grad)
        self.conv2 = nn.Conv2d(16, 32, 5, bias=False)
        self.conv2_bn = nn.BatchNorm2d(32)
        self.lif2 = Leaky(self.beta, threshold=self.thr, spike_grad=self.spike_grad)
        self.fc1 = nn.Linear(32 * 5 * 5, 11)
        self.lif3 = Leaky(self.beta, threshold=self.thr, spike_grad=self.spike_grad)
        self.dropout = nn.Dropout(self.p1)

    def forward(self, x):
        mem1 = self.lif1.init_leaky()
        mem2 = self.lif2.init_leaky()
        mem3 = self.lif3.init_leaky()
        spk3_rec = []
        mem3_rec = []
        for step in range(x.size(0)):
            cur1 = F.avg_pool2d(self.conv1(x[step]), 2)
            if self.batch_norm:
                cur1 = self.conv1_bn(cur1)
            spk1, mem1 = self.lif1(cur1, mem1)
            cur2 = F.avg_pool2d(self.conv2(spk1), 2)
            if self.batch_norm:
                cur2 = self.conv2_bn(cur2)
            spk2, mem2 = self.lif2(cur2, mem2)
            cur3 = self.dropout(self.fc1(spk2.flatten(1)))
            spk3, mem3 = self.lif3(cur3, mem3)
            spk3_rec.append(spk3)
            mem3_rec.append(mem3)
        return torch.stack(spk3_rec, dim=0), torch.stack(mem3_rec, dim=0)


def train(config, net, trainloader, criterion, optimizer, device, scheduler):
    net.train()
    loss_accum = []
    lr_accum = []
    for data, labels in trainloader:
        data, labels = data.to(device), labels.to(device)
        spk_rec, _ = net(data.permute(1, 0, 2, 3, 4))
        loss = criterion(spk_rec, labels.long())
        optimizer.zero_grad()
        loss.backward()
        if config['grad_clip']:
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        loss_accum.append(loss.item() / config['num_steps'])
        lr_accum.append(optimizer.param_groups[0]["lr"])
    return loss_accum, lr_accum


def test(config, net, testloader, device="cpu"):
    correct = 0
    total = 0
    with torch.no_grad():
        net.eval()
        for data in testloader:
            images, labels = data
            images, labels = images.to(device), labels.to(device)
            outputs, _ = net(images.permute(1, 0, 2, 3, 4))
            accuracy = accuracy_rate(outputs, labels.long())
            total += labels.size(0)
            correct += accuracy * labels.size(0)
    return 100 * correct / total


def load_data(config):
    make = lambda n: [((torch.rand(8, config['num_steps'], 2, 32, 32) < 0.1).float(), torch.randint(0, 11, (8,)))
                      for _ in range(n)]
    return make(20), make(5)


config = {'num_trials_eval': 1, 'num_epochs_eval': 3, 'seed': 0, 'threshold': 1.0, 'slope': 25, 'beta': 0.5,
          'num_steps': 20, 'batch_norm': True, 'dropout': 0.1, 'correct_rate': 0.8, 'incorrect_rate': 0.2,
          'lr': 1e-3, 'grad_clip': True}
for trial in range(config['num_trials_eval']):
    torch.manual_seed(config['seed'] + trial)
    train_loss, test_acc, lrs = [], [], []
    net = Net(config)
    device = "cpu"
    criterion = mse_count_loss(correct_rate=config['correct_rate'], incorrect_rate=config['incorrect_rate'])
    optimizer = torch.optim.Adam(net.parameters(), lr=config['lr'])
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=60)
    trainloader, testloader = load_data(config)
    for epoch in range(config['num_epochs_eval']):
        start_time = time.time()
        loss_list, lr_list = train(config, net, trainloader, criterion, optimizer, device, scheduler)
        epoch_time = time.time() - start_time
        test_accuracy = test(config, net, testloader, device)
        print(f'Epoch: {epoch} \tTest Accuracy: {test_accuracy}')
        lrs.extend(lr_list)
        train_loss.extend(loss_list)
        test_acc.append({'epoch': epoch, 'test_acc': test_accuracy, 'train_time': epoch_time})
