# Source: https://github.com/boschresearch/Continuous-Recurrent-Units/pull/4
#   code: lib/CRU.py (interpolation, train_epoch) and lib/losses.py at commit 79723e7
# Adapted: the continuous recurrent unit (Kalman filter layer, encoder, decoder) replaced by a
#   GRU encoder with mean/variance heads returning the same outputs; random irregular series
#   instead of the pendulum/physionet data; args as a Namespace; one epoch of 30 batches on cpu.
import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def rmse(target, predicted, mask=None):
    """Root Mean Squared Error"""
    if mask is None:
        mask = torch.ones_like(predicted)
    else:
        assert mask.shape == predicted.shape == target.shape
    return torch.sqrt(torch.sum(mask * torch.square(target - predicted))/torch.sum(mask))


def mse(target, predicted, mask=None):
    """Mean Squared Error"""
    if mask is None:
        mask = torch.ones_like(predicted)
    else:
        assert mask.shape == predicted.shape == target.shape
    return torch.sum(mask * torch.square(target - predicted))/torch.sum(mask)


def GaussianNegLogLik(targets, pred_mean, pred_variance, mask=None, normalize_dim=False):
    assert pred_mean.shape == targets.shape == pred_variance.shape, f'pred_mean {pred_mean.shape} targets {targets.shape} pred_variance {pred_variance.shape}'

    epsilon = 1e-6 * torch.ones_like(pred_mean)
    pred_variance = torch.maximum(pred_variance, epsilon)

    if mask == None:
        mask = torch.ones_like(pred_mean)

    # sum over dimensions
    const = np.log(2 * np.pi)
    sample_dim_time_wise = mask * \
        (torch.log(pred_variance) + torch.square(pred_mean - targets) / pred_variance + const)
    sample_time_wise = 0.5 * torch.sum(sample_dim_time_wise, -1)

    # divide by number of observed dimensions if normalize_dim
    if normalize_dim:
        num_dim_observed = torch.sum(mask, -1)
        sample_time_wise = sample_time_wise / num_dim_observed

    # mean over time steps
    sample_wise = torch.mean(sample_time_wise, 1)

    return torch.mean(sample_wise)


class CRU(nn.Module):

    def __init__(self, target_dim: int, lsd: int, args, use_cuda_if_available: bool = False, bernoulli_output: bool = False):
        super().__init__()
        self._device = torch.device("cpu")
        self.args = args
        self.bernoulli_output = bernoulli_output
        self._enc = nn.GRU(target_dim + 1, lsd, batch_first=True)
        self._dec_mean = nn.Linear(lsd, target_dim)
        self._dec_var = nn.Sequential(nn.Linear(lsd, target_dim), nn.Softplus())

    def forward(self, obs_batch, time_points=None, obs_valid=None):
        enc_in = torch.cat([obs_batch * obs_valid[..., None], time_points[..., None]], dim=-1)
        post_mean, _ = self._enc(enc_in)
        out_mean, out_var = self._dec_mean(post_mean), self._dec_var(post_mean)
        intermediates = {'post_mean': post_mean}
        return out_mean, out_var, intermediates

    # new code component
    def interpolation(self, data, track_gradient=True):
        if self.bernoulli_output:
            obs, truth, obs_valid, obs_times, mask_truth = [
                j.to(self._device) for j in data]
            mask_obs = None
        else:
            obs, truth, obs_valid, obs_times, mask_truth, mask_obs = [
                j.to(self._device) for j in data]

        obs_times = self.args.ts * obs_times

        with torch.set_grad_enabled(track_gradient):
            output_mean, output_var, intermediates = self.forward(
                obs_batch=obs, time_points=obs_times, obs_valid=obs_valid)

            loss = GaussianNegLogLik(
                output_mean, truth, output_var, mask=mask_truth)
            # compute metric on imputed points only
            mask_imput = (~obs_valid[...,None]) * mask_truth
            imput_loss = GaussianNegLogLik(output_mean, truth, output_var, mask=mask_imput)
            imput_mse = mse(truth, output_mean, mask=mask_imput)

        return loss, output_mean, output_var, obs, truth, mask_obs, mask_truth, intermediates, imput_loss, imput_mse

    def train_epoch(self, dl, optimizer):
        epoch_ll = 0
        epoch_rmse = 0
        epoch_mse = 0

        if self.args.save_intermediates is not None:
            mask_obs_epoch = []
            intermediates_epoch = []

        if self.args.task == 'extrapolation' or self.args.task == 'interpolation':
            epoch_imput_ll = 0
            epoch_imput_mse = 0

        for i, data in enumerate(dl):

            if self.args.task == 'interpolation':
                loss, output_mean, output_var, obs, truth, mask_obs, mask_truth, intermediates, imput_loss, imput_mse = self.interpolation(
                    data)

            else:
                raise Exception('Unknown task')

            # check for NaNs
            if torch.any(torch.isnan(loss)):
                print('--NAN in loss')
            for name, par in self.named_parameters():
                if torch.any(torch.isnan(par)):
                    print('--NAN before optimiser step in parameter ', name)
            torch.autograd.set_detect_anomaly(
                self.args.anomaly_detection)

            # backpropagation
            optimizer.zero_grad()
            loss.backward()
            if self.args.grad_clip:
                nn.utils.clip_grad_norm_(self.parameters(), 1)
            optimizer.step()

            # check for NaNs in gradient
            for name, par in self.named_parameters():
                if torch.any(torch.isnan(par.grad)):
                    print('--NAN in gradient ', name)
                if torch.any(torch.isnan(par)):
                    print('--NAN after optimiser step in parameter ', name)

            # aggregate metrics and intermediates over entire epoch
            epoch_ll += loss
            epoch_rmse += rmse(truth, output_mean, mask_truth).item()
            epoch_mse += mse(truth, output_mean, mask_truth).item()

            if self.args.task == 'extrapolation' or self.args.task == 'interpolation':
                epoch_imput_ll += imput_loss
                epoch_imput_mse += imput_mse
                imput_metrics = [epoch_imput_ll/(i+1), epoch_imput_mse/(i+1)]
            else:
                imput_metrics = None

            if self.args.save_intermediates is not None:
                intermediates_epoch.append(intermediates)
                mask_obs_epoch.append(mask_obs)

        return epoch_ll/(i+1), epoch_rmse/(i+1), epoch_mse/(i+1), [output_mean, output_var], intermediates, [obs, truth, mask_obs], imput_metrics


if __name__ == "__main__":
    torch.manual_seed(0)
    args = argparse.Namespace(task='interpolation', ts=0.3, save_intermediates=None,
                              anomaly_detection=False, grad_clip=True, lr=0.001)
    n, T, D = 480, 50, 12
    obs = torch.randn(n, T, D)
    truth = obs + 0.1 * torch.randn(n, T, D)
    obs_valid = torch.rand(n, T) > 0.5
    obs_times = torch.arange(T, dtype=torch.float32).repeat(n, 1)
    mask_truth = torch.ones(n, T, D)
    mask_obs = torch.ones(n, T, D)
    dl = DataLoader(TensorDataset(obs, truth, obs_valid, obs_times, mask_truth, mask_obs), batch_size=16, shuffle=True)
    model = CRU(target_dim=D, lsd=30, args=args)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    train_ll, train_rmse, train_mse, train_output, intermediates, train_input, train_imput_metrics = model.train_epoch(dl, optimizer)
    print(f'train_nll: {train_ll:3f}, train_rmse: {train_rmse:3f}, train_mse_imput: {train_imput_metrics[1]:3f}')
