# Source: https://github.com/thuml/AutoTimes/issues/21
#   code: Exp_Long_Term_Forecast.vali() and .train() of exp/exp_long_term_forecasting.py, where
#   train() sums each batch's loss into the tensor loss_val (loss_val += loss) for the epoch's
#   mean, the lines the issue points at
# Adapted: the LLM-based AutoTimes model replaced by a small MLP over the flattened window with
#   the same call signature (batch_x, batch_x_mark, None, batch_y_mark); data_provider by lists
#   of random batches (40 training, 8 validation and 8 test batches of 16 windows of 96 steps x
#   7 variables, 4 time features); the device is the cpu where the code says "cuda"; amp, DDP,
#   EarlyStopping's checkpoint file and the final reload dropped (EarlyStopping keeps the best
#   loss and the stop flag); 3 epochs; cpu, seeded.
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch import optim


class Model(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.token_len = args.token_len
        self.net = nn.Sequential(nn.Linear(args.seq_len * 7, 256), nn.GELU(), nn.Linear(256, args.seq_len * 7))

    def forward(self, x, x_mark, y, y_mark):
        b, l, c = x.shape
        return self.net(x.reshape(b, l * c)).reshape(b, l, c)


class EarlyStopping:
    def __init__(self, args, verbose=False):
        self.patience = args.patience
        self.counter = 0
        self.best_score = None
        self.early_stop = False

    def __call__(self, val_loss, model, path):
        score = -val_loss
        if self.best_score is None or score > self.best_score:
            self.best_score = score
            self.counter = 0
        else:
            self.counter += 1
            if self.counter >= self.patience:
                self.early_stop = True


def adjust_learning_rate(optimizer, epoch, args):
    lr = args.learning_rate * (0.5 ** ((epoch - 1) // 1))
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def make_loader(n):
    return [(torch.randn(16, 96, 7), torch.randn(16, 96, 7), torch.randn(16, 96, 4), torch.randn(16, 96, 4))
            for _ in range(n)]


class Exp_Long_Term_Forecast:
    def __init__(self, args):
        self.args = args
        self.device = torch.device('cpu')
        self.model = Model(args).to(self.device)

    def _get_data(self, flag):
        return None, make_loader(40 if flag == 'train' else 8)

    def _select_optimizer(self):
        p_list = []
        for n, p in self.model.named_parameters():
            if not p.requires_grad:
                continue
            else:
                p_list.append(p)
        model_optim = optim.Adam([{'params': p_list}], lr=self.args.learning_rate, weight_decay=self.args.weight_decay)
        return model_optim

    def _select_criterion(self):
        criterion = nn.MSELoss()
        return criterion

    def vali(self, vali_data, vali_loader, criterion, is_test=False):
        total_loss = []
        total_count = []
        self.model.eval()
        with torch.no_grad():
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(vali_loader):
                batch_x = batch_x.float().to(self.device)
                batch_y = batch_y.float()
                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)
                outputs = self.model(batch_x, batch_x_mark, None, batch_y_mark)
                if is_test:
                    outputs = outputs[:, -self.args.token_len:, :]
                    batch_y = batch_y[:, -self.args.token_len:, :].to(self.device)
                else:
                    outputs = outputs[:, :, :]
                    batch_y = batch_y[:, :, :].to(self.device)

                loss = criterion(outputs, batch_y)

                loss = loss.detach().cpu()
                total_loss.append(loss)
                total_count.append(batch_x.shape[0])
        total_loss = np.average(total_loss, weights=total_count)
        self.model.train()
        return total_loss

    def train(self, setting):
        train_data, train_loader = self._get_data(flag='train')
        vali_data, vali_loader = self._get_data(flag='val')
        test_data, test_loader = self._get_data(flag='test')
        path = setting

        time_now = time.time()
        train_steps = len(train_loader)
        early_stopping = EarlyStopping(self.args, verbose=True)

        model_optim = self._select_optimizer()
        criterion = self._select_criterion()

        for epoch in range(self.args.train_epochs):
            iter_count = 0

            loss_val = torch.tensor(0., device=self.device)
            count = torch.tensor(0., device=self.device)

            self.model.train()
            epoch_time = time.time()
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(train_loader):
                iter_count += 1
                model_optim.zero_grad()
                batch_x = batch_x.float().to(self.device)
                batch_y = batch_y.float().to(self.device)
                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)

                outputs = self.model(batch_x, batch_x_mark, None, batch_y_mark)
                loss = criterion(outputs, batch_y)
                loss_val += loss
                count += 1

                if (i + 1) % 20 == 0:
                    print("\titers: {0}, epoch: {1} | loss: {2:.7f}".format(i + 1, epoch + 1, loss.item()))

                loss.backward()
                model_optim.step()
            print("Epoch: {} cost time: {}".format(epoch + 1, time.time() - epoch_time))
            train_loss = loss_val.item() / count.item()

            vali_loss = self.vali(vali_data, vali_loader, criterion)
            test_loss = self.vali(test_data, test_loader, criterion, is_test=True)
            print("Epoch: {}, Steps: {} | Train Loss: {:.7f} Vali Loss: {:.7f} Test Loss: {:.7f}".format(
                epoch + 1, train_steps, train_loss, vali_loss, test_loss))
            early_stopping(vali_loss, self.model, path)
            if early_stopping.early_stop:
                print("Early stopping")
                break
            adjust_learning_rate(model_optim, epoch + 1, self.args)
        return self.model


torch.manual_seed(2021)
args = SimpleNamespace(seq_len=96, token_len=96, learning_rate=1e-4, weight_decay=0, train_epochs=3, patience=3)
exp = Exp_Long_Term_Forecast(args)
exp.train('long_term_forecast_ETTh1_672_96')
