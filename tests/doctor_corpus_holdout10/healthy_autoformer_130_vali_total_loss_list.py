# Source: https://github.com/thuml/Autoformer/issues/130
#   code: exp/exp_main.py (Exp_Main.vali and train) and utils/tools.py (EarlyStopping,
#   adjust_learning_rate) at commit 620ea6a, the version the issue was filed against
# Adapted: vali, train (the non-AMP path) and EarlyStopping kept as they are, with the
#   DataParallel/AMP branches and the loading of the best checkpoint at the end dropped and
#   EarlyStopping's torch.save writing to an in-memory buffer instead of checkpoint.pth;
#   Autoformer -> a small encoder-decoder of the same call (x_enc, x_mark_enc, x_dec,
#   x_mark_dec) -> [B, label_len + pred_len, c_out] (linear embeddings, a GRU and a linear
#   head); the ETT data provider -> random series windows (seq_len 48, label_len 24, pred_len
#   24, 7 variables, 4 time features), 30 training, 8 validation and 8 test batches of 16;
#   3 epochs; cpu, seeded.
import io
import time
import warnings
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch import optim

warnings.filterwarnings('ignore')


def adjust_learning_rate(optimizer, epoch, args):
    if args.lradj == 'type1':
        lr_adjust = {epoch: args.learning_rate * (0.5 ** ((epoch - 1) // 1))}
    if epoch in lr_adjust.keys():
        lr = lr_adjust[epoch]
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        print('Updating learning rate to {}'.format(lr))


class EarlyStopping:
    def __init__(self, patience=7, verbose=False, delta=0):
        self.patience = patience
        self.verbose = verbose
        self.counter = 0
        self.best_score = None
        self.early_stop = False
        self.val_loss_min = np.inf
        self.delta = delta

    def __call__(self, val_loss, model, path):
        score = -val_loss
        if self.best_score is None:
            self.best_score = score
            self.save_checkpoint(val_loss, model, path)
        elif score < self.best_score + self.delta:
            self.counter += 1
            print(f'EarlyStopping counter: {self.counter} out of {self.patience}')
            if self.counter >= self.patience:
                self.early_stop = True
        else:
            self.best_score = score
            self.save_checkpoint(val_loss, model, path)
            self.counter = 0

    def save_checkpoint(self, val_loss, model, path):
        if self.verbose:
            print(f'Validation loss decreased ({self.val_loss_min:.6f} --> {val_loss:.6f}).  Saving model ...')
        torch.save(model.state_dict(), io.BytesIO())
        self.val_loss_min = val_loss


class Model(nn.Module):
    def __init__(self, configs):
        super().__init__()
        self.pred_len = configs.pred_len
        self.enc_embedding = nn.Linear(configs.enc_in + 4, configs.d_model)
        self.dec_embedding = nn.Linear(configs.dec_in + 4, configs.d_model)
        self.encoder = nn.GRU(configs.d_model, configs.d_model, batch_first=True)
        self.decoder = nn.GRU(configs.d_model, configs.d_model, batch_first=True)
        self.projection = nn.Linear(configs.d_model, configs.c_out)

    def forward(self, x_enc, x_mark_enc, x_dec, x_mark_dec):
        _, h = self.encoder(self.enc_embedding(torch.cat([x_enc, x_mark_enc], -1)))
        out, _ = self.decoder(self.dec_embedding(torch.cat([x_dec, x_mark_dec], -1)), h)
        return self.projection(out)


def make_loader(n, args, g):
    return [(torch.randn(16, args.seq_len, 7, generator=g), torch.randn(16, args.label_len + args.pred_len, 7, generator=g),
             torch.randn(16, args.seq_len, 4, generator=g), torch.randn(16, args.label_len + args.pred_len, 4, generator=g))
            for _ in range(n)]


class Exp_Main:
    def __init__(self, args):
        self.args = args
        self.device = torch.device('cpu')
        self.model = Model(args).float()
        g = torch.Generator().manual_seed(0)
        self.loaders = {'train': make_loader(30, args, g), 'val': make_loader(8, args, g), 'test': make_loader(8, args, g)}

    def _get_data(self, flag):
        return None, self.loaders[flag]

    def _select_optimizer(self):
        model_optim = optim.Adam(self.model.parameters(), lr=self.args.learning_rate)
        return model_optim

    def _select_criterion(self):
        criterion = nn.MSELoss()
        return criterion

    def vali(self, vali_data, vali_loader, criterion):
        total_loss = []
        self.model.eval()
        with torch.no_grad():
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(vali_loader):
                batch_x = batch_x.float().to(self.device)
                batch_y = batch_y.float()

                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)

                # decoder input
                dec_inp = torch.zeros_like(batch_y[:, -self.args.pred_len:, :]).float()
                dec_inp = torch.cat([batch_y[:, :self.args.label_len, :], dec_inp], dim=1).float().to(self.device)
                # encoder - decoder
                outputs = self.model(batch_x, batch_x_mark, dec_inp, batch_y_mark)
                f_dim = -1 if self.args.features == 'MS' else 0
                outputs = outputs[:, -self.args.pred_len:, f_dim:]
                batch_y = batch_y[:, -self.args.pred_len:, f_dim:].to(self.device)

                pred = outputs.detach().cpu()
                true = batch_y.detach().cpu()

                loss = criterion(pred, true)

                total_loss.append(loss)
        total_loss = np.average(total_loss)
        self.model.train()
        return total_loss

    def train(self, setting):
        train_data, train_loader = self._get_data(flag='train')
        vali_data, vali_loader = self._get_data(flag='val')
        test_data, test_loader = self._get_data(flag='test')

        path = 'checkpoints/' + setting

        time_now = time.time()

        train_steps = len(train_loader)
        early_stopping = EarlyStopping(patience=self.args.patience, verbose=True)

        model_optim = self._select_optimizer()
        criterion = self._select_criterion()

        for epoch in range(self.args.train_epochs):
            iter_count = 0
            train_loss = []

            self.model.train()
            epoch_time = time.time()
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(train_loader):
                iter_count += 1
                model_optim.zero_grad()
                batch_x = batch_x.float().to(self.device)

                batch_y = batch_y.float().to(self.device)
                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)

                # decoder input
                dec_inp = torch.zeros_like(batch_y[:, -self.args.pred_len:, :]).float()
                dec_inp = torch.cat([batch_y[:, :self.args.label_len, :], dec_inp], dim=1).float().to(self.device)

                # encoder - decoder
                outputs = self.model(batch_x, batch_x_mark, dec_inp, batch_y_mark)

                f_dim = -1 if self.args.features == 'MS' else 0
                outputs = outputs[:, -self.args.pred_len:, f_dim:]
                batch_y = batch_y[:, -self.args.pred_len:, f_dim:].to(self.device)
                loss = criterion(outputs, batch_y)
                train_loss.append(loss.item())

                if (i + 1) % 10 == 0:
                    print("\titers: {0}, epoch: {1} | loss: {2:.7f}".format(i + 1, epoch + 1, loss.item()))
                    speed = (time.time() - time_now) / iter_count
                    left_time = speed * ((self.args.train_epochs - epoch) * train_steps - i)
                    print('\tspeed: {:.4f}s/iter; left time: {:.4f}s'.format(speed, left_time))
                    iter_count = 0
                    time_now = time.time()

                loss.backward()
                model_optim.step()

            print("Epoch: {} cost time: {}".format(epoch + 1, time.time() - epoch_time))
            train_loss = np.average(train_loss)
            vali_loss = self.vali(vali_data, vali_loader, criterion)
            test_loss = self.vali(test_data, test_loader, criterion)

            print("Epoch: {0}, Steps: {1} | Train Loss: {2:.7f} Vali Loss: {3:.7f} Test Loss: {4:.7f}".format(
                epoch + 1, train_steps, train_loss, vali_loss, test_loss))
            early_stopping(vali_loss, self.model, path)
            if early_stopping.early_stop:
                print("Early stopping")
                break

            adjust_learning_rate(model_optim, epoch + 1, self.args)

        return


torch.manual_seed(0)
args = SimpleNamespace(seq_len=48, label_len=24, pred_len=24, enc_in=7, dec_in=7, c_out=7, d_model=32,
                       features='M', learning_rate=1e-3, patience=3, train_epochs=3, lradj='type1')
exp = Exp_Main(args)
exp.train('ETTh1_Autoformer')
