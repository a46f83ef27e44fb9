# Source: https://github.com/DeepLearnPhysics/lartpc_mlreco3d/pull/77
#   code: mlreco/main_funcs.py at commit 0161f2f (prepare, cycle, get_data_minibatched,
#   inference_loop, log)
# Adapted: loader_factory replaced by a DataLoader over 400 random events of 512 voxels
#   (coordinates + energy, semantic labels), trainval replaced by a small class with the same
#   initialize/forward interface around a 3-layer point-wise segmentation MLP run without
#   gradients, the CSV logger and analysis/output hooks dropped, torch.cuda calls removed
#   (cpu), the config inlined (inference: train False, 80 iterations, batch size 4), seeded.
import datetime
import glob
import itertools
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Handlers:
    sess         = None
    data_io      = None
    csv_logger   = None
    weight_io    = None
    train_logger = None
    iteration    = 0


def cycle(data_io):
    while True:
        for x in data_io:
            yield x


class VoxelDataset(Dataset):
    def __init__(self, n_events, n_voxels=512, num_classes=5):
        self.n_events, self.n_voxels, self.num_classes = n_events, n_voxels, num_classes

    def __len__(self):
        return self.n_events

    def __getitem__(self, idx):
        g = torch.Generator().manual_seed(idx)
        voxels = torch.rand(self.n_voxels, 4, generator=g)
        labels = torch.randint(0, self.num_classes, (self.n_voxels,), generator=g)
        return voxels, labels


def loader_factory(cfg):
    dataset = VoxelDataset(cfg['iotool']['num_events'])
    loader = DataLoader(dataset, batch_size=cfg['iotool']['batch_size'], shuffle=False,
                        num_workers=0)
    return loader, ['input_data', 'segment_label']


class trainval(object):
    def __init__(self, cfg):
        self._cfg = cfg
        self._train = cfg['training']['train']
        self.tspent = {'forward': 0., 'train': 0., 'save': 0.}
        self.tspent_sum = {'forward': 0., 'train': 0., 'save': 0.}

    def initialize(self):
        self._net = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                  nn.Linear(64, 5))
        self._net.eval()
        return 0

    def forward(self, data_blob):
        tstart = time.time()
        res = {'loss_seg': [], 'accuracy': []}
        with torch.set_grad_enabled(self._train):
            for voxels, labels in zip(data_blob['input_data'][0], data_blob['segment_label'][0]):
                scores = self._net(voxels)
                res['loss_seg'].append(nn.functional.cross_entropy(
                    scores.reshape(-1, 5), labels.reshape(-1)).item())
                res['accuracy'].append((scores.argmax(-1) == labels).float().mean().item())
        self.tspent['forward'] = time.time() - tstart
        self.tspent['train'] = self.tspent['forward']
        self.tspent_sum['forward'] += self.tspent['forward']
        return res


def prepare(cfg):
    # Set random seed for reproducibility
    np.random.seed(cfg['training']['seed'])
    torch.manual_seed(cfg['training']['seed'])

    handlers = Handlers()

    # IO configuration
    # Batch size for I/O becomes minibatch size
    batch_size = cfg['iotool']['batch_size']
    cfg['iotool']['batch_size'] = cfg['training']['minibatch_size']
    handlers.data_io, cfg['data_keys'] = loader_factory(cfg)
    # TODO check that it does what we want (cycle through dataloader)
    # check on a small sample, check 1/ it cycles through and 2/ randomness
    if cfg['training']['train']:
        handlers.data_io_iter = iter(cycle(handlers.data_io))
    else:
        handlers.data_io_iter = itertools.cycle(handlers.data_io)
    cfg['iotool']['batch_size'] = batch_size

    # Trainer configuration
    handlers.trainer = trainval(cfg)

    # Restore weights if necessary
    loaded_iteration = handlers.trainer.initialize()
    if cfg['training']['train']:
        handlers.iteration = loaded_iteration
    return handlers


def log(handlers, tstamp_iteration, tspent_io, tspent_iteration,
        tsum, tsum_io, res, cfg, epoch):
    """
    Log relevant information to stdout.
    """
    report_step  = cfg['training']['report_step'] and \
                ((handlers.iteration+1) % cfg['training']['report_step'] == 0)

    loss_seg = np.mean(res['loss_seg'])
    acc_seg  = np.mean(res['accuracy'])

    if report_step:
        tmap  = handlers.trainer.tspent
        tfrac = round(tmap['train']/tspent_iteration*100., 2)
        msg = 'Iter. %d (epoch %g) @ %s ... forward time %g%%\n'
        msg = msg % (handlers.iteration, round(epoch, 2), tstamp_iteration, tfrac)
        msg += '   Segmentation: loss %g accuracy %g\n' % (round(loss_seg, 4), acc_seg)
        print(msg)
        sys.stdout.flush()


def get_data_minibatched(dataset, cfg):
    data_blob = {}

    for _ in range(int(cfg['iotool']['batch_size'] / (cfg['training']['minibatch_size'] * len(cfg['training']['gpus'])))):
        for key in cfg['data_keys']:
            if key not in data_blob:
                data_blob[key] = []
            data_blob[key].append([])
        for j in range(len(cfg['training']['gpus'])):
            blob = next(dataset)
            for i, key in enumerate(cfg['data_keys']):
                data_blob[key][-1].append(blob[i])

    return data_blob


def inference_loop(cfg, handlers):
    tsum, tsum_io = 0., 0.
    weights = glob.glob(cfg['training']['model_path']) or ['']
    for weight in weights:
        cfg['training']['model_path'] = weight
        _ = handlers.trainer.initialize()
        handlers.iteration = 0
        while handlers.iteration < cfg['training']['iterations']:
            tstamp_iteration = datetime.datetime.fromtimestamp(time.time()).strftime('%Y-%m-%d %H:%M:%S')
            tstart_iteration = time.time()

            tio_start = time.time()
            data_blob = get_data_minibatched(handlers.data_io_iter, cfg)
            tspent_io = time.time() - tio_start
            tsum_io += tspent_io

            # Run inference
            res = handlers.trainer.forward(data_blob)

            epoch = handlers.iteration / float(len(handlers.data_io))
            tspent_iteration = time.time() - tstart_iteration
            tsum += tspent_iteration

            log(handlers, tstamp_iteration, tspent_io,
                tspent_iteration, tsum, tsum_io,
                res, cfg, epoch)
            handlers.iteration += 1


def inference(cfg):
    handlers = prepare(cfg)
    inference_loop(cfg, handlers)


if __name__ == '__main__':
    cfg = {'iotool': {'batch_size': 4, 'num_events': 400},
           'training': {'seed': 0, 'train': False, 'iterations': 80, 'report_step': 20,
                        'minibatch_size': 4, 'gpus': [0], 'model_path': ''}}
    inference(cfg)
