# Source: https://github.com/visionml/pytracking/pull/313
#   code: ltr/trainers/base_trainer.py (BaseTrainer.train), ltr/trainers/ltr_trainer.py
#   (LTRTrainer) and ltr/admin/stats.py (AverageMeter, StatValue) at commit 3e6a898, the
#   parent of the pull request
# Adapted: LTRTrainer and the stats classes kept as they were; BaseTrainer.train without the
#   fail-safe retry and checkpoint saving; the TensorboardWriter replaced by a stub with the
#   same interface (write_info, write_epoch) that writes nothing; the actor (the reporter's
#   is not public) is an MLP regressing random targets that returns its loss and a stats dict
#   {'Loss/total': loss, 'Loss/l2': loss} as the pull request describes it; the
#   loaders are small iterables with the attributes the trainer reads (name, training,
#   batch_size, epoch_interval); 3 epochs of 30 training and 8 validation batches, cpu, seeded.
import os
import time
from collections import OrderedDict

import torch
import torch.nn as nn


class StatValue:
    def __init__(self):
        self.clear()

    def reset(self):
        self.val = 0

    def clear(self):
        self.reset()
        self.history = []

    def update(self, val):
        self.val = val
        self.history.append(self.val)


class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self):
        self.clear()
        self.has_new_data = False

    def reset(self):
        self.avg = 0
        self.val = 0
        self.sum = 0
        self.count = 0

    def clear(self):
        self.reset()
        self.history = []

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def new_epoch(self):
        if self.count > 0:
            self.history.append(self.avg)
            self.reset()
            self.has_new_data = True
        else:
            self.has_new_data = False


class TensorboardWriter:
    def __init__(self, directory, loader_names):
        self.directory = directory
        self.loader_names = loader_names

    def write_info(self, module_name, script_name, description):
        pass

    def write_epoch(self, stats, epoch, ind=-1):
        pass


class BaseTrainer:
    """Base trainer class. Contains functions for training and saving/loading checkpoints.
    Trainer classes should inherit from this one and overload the train_epoch function."""

    def __init__(self, actor, loaders, optimizer, settings, lr_scheduler=None):
        self.actor = actor
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.loaders = loaders

        self.update_settings(settings)

        self.epoch = 0
        self.stats = {}

        self.device = getattr(settings, 'device', None)
        if self.device is None:
            self.device = torch.device("cuda:0" if torch.cuda.is_available() and settings.use_gpu else "cpu")

        self.actor.to(self.device)

    def update_settings(self, settings=None):
        """Updates the trainer settings. Must be called to update internal settings."""
        if settings is not None:
            self.settings = settings
        self._checkpoint_dir = None

    def train(self, max_epochs, load_latest=False, fail_safe=True):
        epoch = -1
        for epoch in range(self.epoch+1, max_epochs+1):
            self.epoch = epoch

            self.train_epoch()

            if self.lr_scheduler is not None:
                self.lr_scheduler.step()

        print('Finished training!')


class LTRTrainer(BaseTrainer):
    def __init__(self, actor, loaders, optimizer, settings, lr_scheduler=None):
        super().__init__(actor, loaders, optimizer, settings, lr_scheduler)

        self._set_default_settings()

        # Initialize statistics variables
        self.stats = OrderedDict({loader.name: None for loader in self.loaders})

        # Initialize tensorboard
        tensorboard_writer_dir = os.path.join(self.settings.env.tensorboard_dir, self.settings.project_path)
        self.tensorboard_writer = TensorboardWriter(tensorboard_writer_dir, [l.name for l in loaders])

        self.move_data_to_gpu = getattr(settings, 'move_data_to_gpu', True)

    def _set_default_settings(self):
        # Dict of all default values
        default = {'print_interval': 10,
                   'print_stats': None,
                   'description': ''}

        for param, default_value in default.items():
            if getattr(self.settings, param, None) is None:
                setattr(self.settings, param, default_value)

    def cycle_dataset(self, loader):
        """Do a cycle of training or validation."""

        self.actor.train(loader.training)
        torch.set_grad_enabled(loader.training)

        self._init_timing()

        for i, data in enumerate(loader, 1):
            # get inputs
            if self.move_data_to_gpu:
                data = {k: v.to(self.device) for k, v in data.items()}

            data['epoch'] = self.epoch
            data['settings'] = self.settings

            # forward pass
            loss, stats = self.actor(data)

            # backward pass and update weights
            if loader.training:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

            # update statistics
            self._update_stats(stats, loader.batch_size, loader)

            # print statistics
            self._print_stats(i, loader, loader.batch_size)

    def train_epoch(self):
        """Do one epoch for each loader."""
        for loader in self.loaders:
            if self.epoch % loader.epoch_interval == 0:
                self.cycle_dataset(loader)

        self._stats_new_epoch()
        self._write_tensorboard()

    def _init_timing(self):
        self.num_frames = 0
        self.start_time = time.time()
        self.prev_time = self.start_time

    def _update_stats(self, new_stats: OrderedDict, batch_size, loader):
        # Initialize stats if not initialized yet
        if loader.name not in self.stats.keys() or self.stats[loader.name] is None:
            self.stats[loader.name] = OrderedDict({name: AverageMeter() for name in new_stats.keys()})

        for name, val in new_stats.items():
            if name not in self.stats[loader.name].keys():
                self.stats[loader.name][name] = AverageMeter()
            self.stats[loader.name][name].update(val, batch_size)

    def _print_stats(self, i, loader, batch_size):
        self.num_frames += batch_size
        current_time = time.time()
        batch_fps = batch_size / max(current_time - self.prev_time, 1e-6)
        average_fps = self.num_frames / max(current_time - self.start_time, 1e-6)
        self.prev_time = current_time
        if i % self.settings.print_interval == 0 or i == loader.__len__():
            print_str = '[%s: %d, %d / %d] ' % (loader.name, self.epoch, i, loader.__len__())
            print_str += 'FPS: %.1f (%.1f)  ,  ' % (average_fps, batch_fps)
            for name, val in self.stats[loader.name].items():
                if (self.settings.print_stats is None or name in self.settings.print_stats) and hasattr(val, 'avg'):
                    print_str += '%s: %.5f  ,  ' % (name, val.avg)
            print(print_str[:-5])

    def _stats_new_epoch(self):
        # Record learning rate
        for loader in self.loaders:
            if loader.training:
                lr_list = self.lr_scheduler.get_last_lr()
                for i, lr in enumerate(lr_list):
                    var_name = 'LearningRate/group{}'.format(i)
                    if var_name not in self.stats[loader.name].keys():
                        self.stats[loader.name][var_name] = StatValue()
                    self.stats[loader.name][var_name].update(lr)

        for loader_stats in self.stats.values():
            if loader_stats is None:
                continue
            for stat_value in loader_stats.values():
                if hasattr(stat_value, 'new_epoch'):
                    stat_value.new_epoch()

    def _write_tensorboard(self):
        if self.epoch == 1:
            self.tensorboard_writer.write_info(self.settings.module_name, self.settings.script_name, self.settings.description)

        self.tensorboard_writer.write_epoch(self.stats, self.epoch)


class RegressionActor(nn.Module):
    def __init__(self, net, objective):
        super().__init__()
        self.net = net
        self.objective = objective

    def forward(self, data):
        pred = self.net(data['input'])
        loss = self.objective(pred, data['target'])
        stats = {'Loss/total': loss,
                 'Loss/l2': loss}
        return loss, stats


class Loader:
    def __init__(self, name, training, n_batches, batch_size=32, epoch_interval=1):
        self.name, self.training, self.batch_size = name, training, batch_size
        self.epoch_interval, self.n_batches = epoch_interval, n_batches

    def __len__(self):
        return self.n_batches

    def __iter__(self):
        for _ in range(self.n_batches):
            yield {'input': torch.randn(self.batch_size, 256), 'target': torch.randn(self.batch_size, 64)}


class Env:
    tensorboard_dir = 'tensorboard'


class Settings:
    env = Env()
    project_path = 'regression/default'
    module_name = 'regression'
    script_name = 'default'
    use_gpu = False
    print_interval = 20


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 64))
actor = RegressionActor(net, nn.MSELoss())
optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=15, gamma=0.2)
loaders = [Loader("train", True, 30), Loader("val", False, 8)]
trainer = LTRTrainer(actor, loaders, optimizer, Settings(), lr_scheduler)
trainer.train(3)
