# Source: https://github.com/sraashis/deepdyn/blob/6ffbdb8bf8a2deccbb27392851db3ec9e9f26d98/torchtrainer/torchtrainer.py
# Adapted excerpt, after the fix https://github.com/sraashis/deepdyn/commit/6ffbdb8bf8a2deccbb27392851db3ec9e9f26d98
# (trimmed to the code the fix touches; omitted lines are marked).
"""
### author: Aashis Khanal
### sraashis@gmail.com
### date: 9/10/2018
"""

import os
import random as rd
import sys

import numpy as np
import torch
import torch.nn.functional as F

from utils.loss import dice_loss
from utils.measurements import ScoreAccumulator


class NNTrainer:

    def __init__(self, conf=None, model=None, optimizer=None):

        # Initialize parameters and directories before-hand so that we can clearly track which ones are used
        self.conf = conf
        self.log_dir = self.conf.get('Dirs').get('logs', 'net_logs')
        self.epochs = self.conf.get('Params').get('epochs', 100)
        self.log_frequency = self.conf.get('Params').get('log_frequency', 10)
        self.validation_frequency = self.conf.get('Params').get('validation_frequency', 1)
        self.mode = self.conf.get('Params').get('mode', 'test')

        # Initialize necessary logging conf
        self.checkpoint_file = os.path.join(self.log_dir, self.conf.get('checkpoint_file'))

        self.log_headers = self.get_log_headers()
        _log_key = self.conf.get('checkpoint_file').split('.')[0]
        self.test_logger = NNTrainer.get_logger(log_file=os.path.join(self.log_dir, _log_key + '-TEST.csv'),
                                                header=self.log_headers.get('test', ''))
        if self.mode == 'train':
            self.train_logger = NNTrainer.get_logger(log_file=os.path.join(self.log_dir, _log_key + '-TRAIN.csv'),
                                                     header=self.log_headers.get('train', ''))
            self.val_logger = NNTrainer.get_logger(log_file=os.path.join(self.log_dir, _log_key + '-VAL.csv'),
                                                   header=self.log_headers.get('validation', ''))

        #  Function to initialize class weights, default is [1, 1]
        self.dparm = self.conf.get("Funcs").get('dparm')

        # Handle gpu/cpu
        if torch.cuda.is_available():
            self.device = torch.device("cuda" if self.conf['Params'].get('use_gpu', False) else "cpu")
        else:
            print('### GPU not found.')
            self.device = torch.device("cpu")

        # Initialization to save model
        self.model = model.to(self.device)
        self.optimizer = optimizer
        self.checkpoint = {'total_epochs:': 0, 'epochs': 0, 'state': None, 'score': 0.0, 'model': 'EMPTY'}
        self.patience = self.conf.get('Params').get('patience', 150)

    def test(self, data_loaders=None):
        print('Running test')
        score = ScoreAccumulator()
        self.model.eval()
        with torch.no_grad():
            self.evaluate(data_loaders=data_loaders, gen_images=True, score_acc=score, logger=self.test_logger)
        self._on_test_end(log_file=self.test_logger.name)
        if not self.test_logger and not self.test_logger.closed:
            self.test_logger.close()

    def evaluate(self, data_loaders=None, logger=None, gen_images=False, score_acc=None):
        return NotImplementedError('------Evaluation step can vary a lot.. Needs to be implemented.-------')

    def _on_test_end(self, **kw):
        pass

    def train(self, data_loader=None, validation_loader=None, epoch_run=None):
        print('Training...')
        for epoch in range(1, self.epochs + 1):
            self.model.train()
            # self._adjust_learning_rate(epoch=epoch)
            self.checkpoint['total_epochs'] = epoch

            # Run one epoch
            epoch_run(epoch=epoch, data_loader=data_loader, logger=self.train_logger)

            self._on_epoch_end(data_loader=data_loader, log_file=self.train_logger.name)

            # Validation_frequency is the number of epoch until validation
            if epoch % self.validation_frequency == 0:
                print('############# Running validation... ####################')
                self.model.eval()
                with torch.no_grad():
                    self.validation(epoch=epoch, validation_loader=validation_loader, epoch_run=epoch_run)
                self._on_validation_end(data_loader=validation_loader, log_file=self.val_logger.name)
                if self.early_stop(patience=self.patience):
                    return
                print('########################################################')

        if not self.train_logger and not self.train_logger.closed:
            self.train_logger.close()
        if not self.val_logger and not self.val_logger.closed:
            self.val_logger.close()

    def _on_epoch_end(self, **kw):
        pass

    def _on_validation_end(self, **kw):
        pass

    def get_log_headers(self):
        # EXAMPLE:
        # return {
        #     'train': 'ID,EPOCH,BATCH,PRECISION,RECALL,F1,ACCURACY,LOSS',
        #     'validation': 'ID,PRECISION,RECALL,F1,ACCURACY',
        #     'test': 'ID,PRECISION,RECALL,F1,ACCURACY'
        # }
        raise NotImplementedError('Must be implemented to use.')

    def validation(self, epoch=None, validation_loader=None, epoch_run=None):
        score_acc = ScoreAccumulator()
        self.evaluate(data_loaders=validation_loader, logger=self.val_logger, gen_images=False, score_acc=score_acc)
        # epoch_run(epoch=epoch, data_loader=validation_loader, logger=self.val_logger, score_acc=score_acc)
        p, r, f1, a = score_acc.get_prfa()
        print('>>> PRF1: ', [p, r, f1], self.dparm(self.conf))
        self._save_if_better(score=f1)

    ...  # (lines 127-327 omitted)
