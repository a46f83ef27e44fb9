# Source: https://github.com/horovod/horovod/pull/641
#   code: examples/pytorch_imagenet_resnet50.py (train, validate, adjust_learning_rate,
#   accuracy, Metric) and horovod/torch/mpi_ops.py (HorovodAllreduce, allreduce) at the parent
#   of commit 6bac3dd
# Adapted: train(), validate(), Metric and the helpers kept as they are, with the tqdm bar and
#   the tensorboardX writer dropped (the postfix values are still computed) and checkpointing
#   left out; horovod -> a single-process stand-in whose allreduce is the same autograd
#   Function (averaging over one worker) and whose DistributedOptimizer and broadcasts are
#   pass-throughs; ResNet-50 on ImageNet -> a small residual CNN on random 3x32x32 images of
#   10 classes, 40 training and 10 validation batches of 32 per epoch, 3 epochs with the
#   default learning-rate schedule; cpu, seeded.
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class HorovodAllreduce(torch.autograd.Function):
    """An autograd function that performs allreduce on a tensor."""

    @staticmethod
    def forward(ctx, tensor, average, name):
        ctx.average = average
        return tensor.clone() / (hvd.size() if average else 1)

    @staticmethod
    def backward(ctx, grad_output):
        return hvd.allreduce(grad_output, ctx.average), None, None


class SingleProcessHorovod:
    def init(self):
        pass

    def size(self):
        return 1

    def rank(self):
        return 0

    def allreduce(self, tensor, average=True, name=None):
        return HorovodAllreduce.apply(tensor, average, name)

    def DistributedOptimizer(self, optimizer, named_parameters=None):
        return optimizer

    def broadcast_parameters(self, params, root_rank):
        pass


hvd = SingleProcessHorovod()


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(out)))


class SmallResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.layers = nn.Sequential(Block(32), Block(32), nn.MaxPool2d(2), Block(32), Block(32))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))


args = SimpleNamespace(batch_size=32, val_batch_size=32, epochs=3, base_lr=0.0125,
                       warmup_epochs=5, momentum=0.9, wd=0.00005, cuda=False, seed=42)
hvd.init()
torch.manual_seed(args.seed)
verbose = 1 if hvd.rank() == 0 else 0

train_dataset = torch.utils.data.TensorDataset(torch.randn(1280, 3, 32, 32), torch.randint(0, 10, (1280,)))
train_sampler = torch.utils.data.distributed.DistributedSampler(
    train_dataset, num_replicas=hvd.size(), rank=hvd.rank())
train_loader = torch.utils.data.DataLoader(
    train_dataset, batch_size=args.batch_size, sampler=train_sampler)
val_dataset = torch.utils.data.TensorDataset(torch.randn(320, 3, 32, 32), torch.randint(0, 10, (320,)))
val_sampler = torch.utils.data.distributed.DistributedSampler(
    val_dataset, num_replicas=hvd.size(), rank=hvd.rank())
val_loader = torch.utils.data.DataLoader(val_dataset, batch_size=args.val_batch_size,
                                         sampler=val_sampler)

model = SmallResNet()
optimizer = optim.SGD(model.parameters(), lr=args.base_lr * hvd.size(),
                      momentum=args.momentum, weight_decay=args.wd)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)


def train(epoch):
    model.train()
    train_sampler.set_epoch(epoch)
    train_loss = Metric('train_loss')
    train_accuracy = Metric('train_accuracy')

    for batch_idx, (data, target) in enumerate(train_loader):
        adjust_learning_rate(epoch, batch_idx)

        if args.cuda:
            data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()

        train_loss.update(loss)
        train_accuracy.update(accuracy(output, target))
        postfix = {'loss': train_loss.avg.item(),
                   'accuracy': 100. * train_accuracy.avg.item()}
    if verbose:
        print('Train Epoch     #{}'.format(epoch + 1), postfix)


def validate(epoch):
    model.eval()
    val_loss = Metric('val_loss')
    val_accuracy = Metric('val_accuracy')

    with torch.no_grad():
        for data, target in val_loader:
            if args.cuda:
                data, target = data.cuda(), target.cuda()
            output = model(data)

            val_loss.update(F.cross_entropy(output, target))
            val_accuracy.update(accuracy(output, target))
            postfix = {'loss': val_loss.avg.item(),
                       'accuracy': 100. * val_accuracy.avg.item()}
    if verbose:
        print('Validate Epoch  #{}'.format(epoch + 1), postfix)


def adjust_learning_rate(epoch, batch_idx):
    if epoch < args.warmup_epochs:
        epoch += float(batch_idx + 1) / len(train_loader)
        lr_adj = 1. / hvd.size() * (epoch * (hvd.size() - 1) / args.warmup_epochs + 1)
    elif epoch < 30:
        lr_adj = 1.
    elif epoch < 60:
        lr_adj = 1e-1
    elif epoch < 80:
        lr_adj = 1e-2
    else:
        lr_adj = 1e-3
    for param_group in optimizer.param_groups:
        param_group['lr'] = args.base_lr * hvd.size() * lr_adj


def accuracy(output, target):
    # get the index of the max log-probability
    pred = output.max(1, keepdim=True)[1]
    return pred.eq(target.view_as(pred)).cpu().float().mean()


# Horovod: average metrics from distributed training.
class Metric(object):
    def __init__(self, name):
        self.name = name
        self.sum = torch.tensor(0.)
        self.n = torch.tensor(0.)

    def update(self, val):
        self.sum += hvd.allreduce(val.cpu(), name=self.name)
        self.n += 1

    @property
    def avg(self):
        return self.sum / self.n


for epoch in range(0, args.epochs):
    train(epoch)
    validate(epoch)
