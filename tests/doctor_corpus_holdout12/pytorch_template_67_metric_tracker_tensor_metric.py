# Source: https://github.com/victoresque/pytorch-template/issues/67
#   code: trainer/trainer.py (Trainer), base/base_trainer.py (BaseTrainer.train), utils/util.py
#   (MetricTracker, inf_loop) and model/metric.py (accuracy) of the template, with a metric
#   function that returns a tensor as the issue describes
# Adapted: Trainer._train_epoch/_valid_epoch and MetricTracker.update kept as they were;
#   MetricTracker's pandas DataFrame (pandas is not installed) replaced by a dict of columns
#   with the same update/reset/avg/result calls; the TensorboardWriter by a stand-in whose
#   add_scalar/add_image/add_histogram write nothing and torchvision's make_grid by identity;
#   BaseTrainer reduced to its epoch loop (no checkpoints, no early stop); the MNIST LeNet and
#   loaders replaced by the template's MnistModel on 30 training and 5 validation batches of
#   32 random 1x28x28 images; the metrics are the template's accuracy and a reporter-style
#   nll metric that returns a tensor; 2 epochs, log_step 10, cpu, seeded.
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(message)s")


def make_grid(tensor, nrow=8, normalize=False):
    return tensor


class TensorboardWriter:
    def __init__(self):
        self.step = 0
        self.mode = ''

    def set_step(self, step, mode='train'):
        self.mode = mode
        self.step = step

    def add_scalar(self, tag, value):
        pass

    def add_image(self, tag, img):
        pass

    def add_histogram(self, tag, values, bins='auto'):
        pass


class MetricTracker:
    def __init__(self, *keys, writer=None):
        self.writer = writer
        self._data = {col: {key: 0 for key in keys} for col in ('total', 'counts', 'average')}
        self.reset()

    def reset(self):
        for col in self._data:
            for key in self._data[col]:
                self._data[col][key] = 0

    def update(self, key, value, n=1):
        if self.writer is not None:
            self.writer.add_scalar(key, value)
        self._data['total'][key] += value * n
        self._data['counts'][key] += n
        self._data['average'][key] = self._data['total'][key] / self._data['counts'][key]

    def avg(self, key):
        return self._data['average'][key]

    def result(self):
        return dict(self._data['average'])


def accuracy(output, target):
    with torch.no_grad():
        pred = torch.argmax(output, dim=1)
        assert pred.shape[0] == len(target)
        correct = 0
        correct += torch.sum(pred == target).item()
    return correct / len(target)


def nll(output, target):
    return F.nll_loss(output, target)


class MnistModel(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, num_classes)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


class Trainer:
    def __init__(self, model, criterion, metric_ftns, optimizer, data_loader,
                 valid_data_loader=None, epochs=2):
        self.model, self.criterion, self.metric_ftns, self.optimizer = model, criterion, metric_ftns, optimizer
        self.logger = logging.getLogger('trainer')
        self.device = torch.device('cpu')
        self.writer = TensorboardWriter()
        self.epochs = epochs
        self.data_loader = data_loader
        self.len_epoch = len(self.data_loader)
        self.valid_data_loader = valid_data_loader
        self.do_validation = self.valid_data_loader is not None
        self.lr_scheduler = None
        self.log_step = 10

        self.train_metrics = MetricTracker('loss', *[m.__name__ for m in self.metric_ftns], writer=self.writer)
        self.valid_metrics = MetricTracker('loss', *[m.__name__ for m in self.metric_ftns], writer=self.writer)

    def train(self):
        for epoch in range(1, self.epochs + 1):
            result = self._train_epoch(epoch)
            log = {'epoch': epoch}
            log.update(result)
            for key, value in log.items():
                self.logger.info('    {:15s}: {}'.format(str(key), value))

    def _train_epoch(self, epoch):
        self.model.train()
        self.train_metrics.reset()
        for batch_idx, (data, target) in enumerate(self.data_loader):
            data, target = data.to(self.device), target.to(self.device)

            self.optimizer.zero_grad()
            output = self.model(data)
            loss = self.criterion(output, target)
            loss.backward()
            self.optimizer.step()

            self.writer.set_step((epoch - 1) * self.len_epoch + batch_idx)
            self.train_metrics.update('loss', loss.item())
            for met in self.metric_ftns:
                self.train_metrics.update(met.__name__, met(output, target))

            if batch_idx % self.log_step == 0:
                self.logger.info('Train Epoch: {} {} Loss: {:.6f}'.format(
                    epoch,
                    self._progress(batch_idx),
                    loss.item()))
                self.writer.add_image('input', make_grid(data.cpu(), nrow=8, normalize=True))

            if batch_idx == self.len_epoch:
                break
        log = self.train_metrics.result()

        if self.do_validation:
            val_log = self._valid_epoch(epoch)
            log.update(**{'val_'+k : v for k, v in val_log.items()})

        if self.lr_scheduler is not None:
            self.lr_scheduler.step()
        return log

    def _valid_epoch(self, epoch):
        self.model.eval()
        self.valid_metrics.reset()
        with torch.no_grad():
            for batch_idx, (data, target) in enumerate(self.valid_data_loader):
                data, target = data.to(self.device), target.to(self.device)

                output = self.model(data)
                loss = self.criterion(output, target)

                self.writer.set_step((epoch - 1) * len(self.valid_data_loader) + batch_idx, 'valid')
                self.valid_metrics.update('loss', loss.item())
                for met in self.metric_ftns:
                    self.valid_metrics.update(met.__name__, met(output, target))
                self.writer.add_image('input', make_grid(data.cpu(), nrow=8, normalize=True))

        for name, p in self.model.named_parameters():
            self.writer.add_histogram(name, p, bins='auto')
        return self.valid_metrics.result()

    def _progress(self, batch_idx):
        base = '[{}/{} ({:.0f}%)]'
        current = batch_idx
        total = self.len_epoch
        return base.format(current, total, 100.0 * current / total)


torch.manual_seed(0)
data_loader = [(torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))) for _ in range(30)]
valid_data_loader = [(torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))) for _ in range(5)]
model = MnistModel()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001, weight_decay=0, amsgrad=True)
trainer = Trainer(model, F.nll_loss, [accuracy, nll], optimizer,
                  data_loader=data_loader, valid_data_loader=valid_data_loader, epochs=2)
trainer.train()
