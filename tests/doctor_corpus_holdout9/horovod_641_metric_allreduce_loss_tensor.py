# Source: https://github.com/horovod/horovod/pull/641
#   code: train(), validate(), adjust_learning_rate(), accuracy() and Metric of
#   examples/pytorch_imagenet_resnet50.py as the pull request found them (train() passes the
#   loss tensor to train_loss.update, Metric.update reduces val.cpu() without detaching)
# Adapted: horovod replaced by a one-worker stand-in with the same calls (init, size, rank,
#   allreduce averaging over the single worker, DistributedOptimizer returning the optimizer);
#   the ResNet-50 by a small convolutional network with 10 classes, the ImageNet loaders by
#   lists of 30 training and 6 validation batches of 16 random 3x32x32 images, 2 epochs;
#   argparse replaced by a namespace with the used fields; tqdm, tensorboardX and
#   checkpointing dropped; cpu, seeded.
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class hvd:
    @staticmethod
    def init():
        pass

    @staticmethod
    def size():
        return 1

    @staticmethod
    def rank():
        return 0

    @staticmethod
    def allreduce(tensor, name=None):
        return tensor.mul(1.0 / hvd.size())

    @staticmethod
    def DistributedOptimizer(optimizer, named_parameters=None, backward_passes_per_step=1):
        return optimizer


args = SimpleNamespace(batch_size=16, val_batch_size=16, epochs=2, base_lr=0.0125,
                       warmup_epochs=5, momentum=0.9, wd=0.00005, batches_per_allreduce=1)
allreduce_batch_size = args.batch_size * args.batches_per_allreduce

hvd.init()
torch.manual_seed(42)

train_loader = [(torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))) for _ in range(30)]
val_loader = [(torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))) for _ in range(6)]

model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(64, 10))
optimizer = optim.SGD(model.parameters(), lr=args.base_lr * hvd.size(),
                      momentum=args.momentum, weight_decay=args.wd)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     backward_passes_per_step=args.batches_per_allreduce)


def train(epoch):
    model.train()
    train_loss = Metric('train_loss')
    train_accuracy = Metric('train_accuracy')

    for batch_idx, (data, target) in enumerate(train_loader):
        adjust_learning_rate(epoch, batch_idx)

        optimizer.zero_grad()
        for i in range(0, allreduce_batch_size, args.batch_size):
            data_step = data[i:i + args.batch_size]
            target_step = target[i:i + args.batch_size]
            output = model(data_step)
            train_accuracy.update(accuracy(output, target_step))
            loss = F.cross_entropy(output, target_step)
            loss = args.batch_size * loss / allreduce_batch_size
            train_loss.update(loss)
            loss.backward()
        optimizer.step()
        if batch_idx % 10 == 0:
            print('epoch', epoch + 1, 'batch', batch_idx, 'loss', train_loss.avg.item(),
                  'accuracy', 100. * train_accuracy.avg.item())


def validate(epoch):
    model.eval()
    val_loss = Metric('val_loss')
    val_accuracy = Metric('val_accuracy')

    with torch.no_grad():
        for data, target in val_loader:
            output = model(data)

            val_loss.update(F.cross_entropy(output, target))
            val_accuracy.update(accuracy(output, target))
    print('validate epoch', epoch + 1, 'loss', val_loss.avg.item(),
          'accuracy', 100. * val_accuracy.avg.item())


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
