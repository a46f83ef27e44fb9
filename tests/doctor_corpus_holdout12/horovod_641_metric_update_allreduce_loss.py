# Source: https://github.com/horovod/horovod/pull/641
#   code: examples/pytorch_imagenet_resnet50.py (train, validate, accuracy, Metric) at 6608ba0e^,
#   the parent of the pull request's commit
# Adapted: train, validate, accuracy and Metric kept as they were; horovod.torch (not installed)
#   replaced by a stand-in for one worker with the same calls (init, size, rank, local_rank,
#   allreduce as an autograd function that averages over the one worker, DistributedOptimizer,
#   broadcast_parameters, broadcast_optimizer_state); tqdm by a small progress stand-in with
#   set_postfix/update; tensorboardX dropped (log_writer = None); ResNet-50 on ImageNet replaced
#   by a small CNN on 40 training and 5 validation batches of 16 random 3x32x32 images of 10
#   classes; the learning-rate schedule kept, 2 epochs, no checkpoints; cpu, seeded.
import types

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor):
        return tensor.clone() / _size()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output / _size()


def _size():
    return 1


hvd = types.SimpleNamespace(
    init=lambda: None, size=_size, rank=lambda: 0, local_rank=lambda: 0,
    allreduce=lambda tensor, name=None: _Allreduce.apply(tensor),
    DistributedOptimizer=lambda optimizer, named_parameters=None: optimizer,
    broadcast_parameters=lambda state_dict, root_rank=0: None,
    broadcast_optimizer_state=lambda optimizer, root_rank=0: None)


class tqdm:
    def __init__(self, total, desc, disable):
        self.total, self.desc, self.disable, self.n, self.postfix = total, desc, disable, 0, {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        print(self.desc, self.n, self.postfix)

    def set_postfix(self, postfix):
        self.postfix = postfix

    def update(self, n):
        self.n += n


args = types.SimpleNamespace(batch_size=16, val_batch_size=16, epochs=2, base_lr=0.0125,
                             warmup_epochs=1, momentum=0.9, wd=0.00005, seed=42, cuda=False)
hvd.init()
torch.manual_seed(args.seed)
verbose = 1 if hvd.rank() == 0 else 0
log_writer = None

train_loader = [(torch.randn(args.batch_size, 3, 32, 32), torch.randint(0, 10, (args.batch_size,)))
                for _ in range(40)]
val_loader = [(torch.randn(args.val_batch_size, 3, 32, 32), torch.randint(0, 10, (args.val_batch_size,)))
              for _ in range(5)]

model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(64 * 8 * 8, 10))
optimizer = optim.SGD(model.parameters(), lr=args.base_lr * hvd.size(),
                      momentum=args.momentum, weight_decay=args.wd)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)


def train(epoch):
    model.train()
    train_loss = Metric('train_loss')
    train_accuracy = Metric('train_accuracy')

    with tqdm(total=len(train_loader),
              desc='Train Epoch     #{}'.format(epoch + 1),
              disable=not verbose) as t:
        for batch_idx, (data, target) in enumerate(train_loader):
            adjust_learning_rate(epoch, batch_idx)

            optimizer.zero_grad()
            output = model(data)
            loss = F.cross_entropy(output, target)
            loss.backward()
            optimizer.step()

            train_loss.update(loss)
            train_accuracy.update(accuracy(output, target))
            t.set_postfix({'loss': train_loss.avg.item(),
                           'accuracy': 100. * train_accuracy.avg.item()})
            t.update(1)


def validate(epoch):
    model.eval()
    val_loss = Metric('val_loss')
    val_accuracy = Metric('val_accuracy')

    with tqdm(total=len(val_loader),
              desc='Validate Epoch  #{}'.format(epoch + 1),
              disable=not verbose) as t:
        with torch.no_grad():
            for data, target in val_loader:
                output = model(data)

                val_loss.update(F.cross_entropy(output, target))
                val_accuracy.update(accuracy(output, target))
                t.set_postfix({'loss': val_loss.avg.item(),
                               'accuracy': 100. * val_accuracy.avg.item()})
                t.update(1)


def adjust_learning_rate(epoch, batch_idx):
    if epoch < args.warmup_epochs:
        epoch += float(batch_idx + 1) / len(train_loader)
        lr_adj = 1. / hvd.size() * (epoch * (hvd.size() - 1) / args.warmup_epochs + 1)
    elif epoch < 30:
        lr_adj = 1.
    else:
        lr_adj = 1e-1
    for param_group in optimizer.param_groups:
        param_group['lr'] = args.base_lr * hvd.size() * lr_adj


def accuracy(output, target):
    # get the index of the max log-probability
    pred = output.max(1, keepdim=True)[1]
    return pred.eq(target.view_as(pred)).cpu().float().mean()


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
