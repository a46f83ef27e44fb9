# Source: https://github.com/kan-bayashi/ParallelWaveGAN/pull/26
#   code: parallel_wavegan/bin/train.py (Trainer._train_step, _eval_step, _eval_epoch) at the parent of 8c03abbf
# Adapted: the WaveNet-style generator and the discriminator are replaced by small Conv1d stacks with the
# same call signatures, the multi-resolution STFT loss by a single-resolution one, data loaders by lists of
# random (z, c, y, None) batches; tensorboard, checkpointing, tqdm and intermediate plots are left out;
# 60 training steps with an evaluation pass of 10 dev batches every 20 steps on CPU.
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self, aux_channels=20, channels=32, upsample=64):
        super().__init__()
        self.upsample = nn.Upsample(scale_factor=upsample)
        self.net = nn.Sequential(nn.Conv1d(1 + aux_channels, channels, 7, padding=3), nn.Tanh(),
                                 nn.Conv1d(channels, channels, 7, padding=3), nn.Tanh(),
                                 nn.Conv1d(channels, 1, 7, padding=3))

    def forward(self, z, c):
        return self.net(torch.cat([z, self.upsample(c)], dim=1))


class Discriminator(nn.Module):
    def __init__(self, channels=32):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, channels, 9, padding=4), nn.LeakyReLU(0.2),
                                 nn.Conv1d(channels, channels, 9, padding=4, stride=2), nn.LeakyReLU(0.2),
                                 nn.Conv1d(channels, 1, 3, padding=1))

    def forward(self, x):
        return self.net(x)


class STFTLoss(nn.Module):
    def __init__(self, fft_size=512, shift_size=128):
        super().__init__()
        self.fft_size, self.shift_size = fft_size, shift_size
        self.register_buffer("window", torch.hann_window(fft_size))

    def forward(self, x, y):
        x_mag = torch.stft(x, self.fft_size, self.shift_size, window=self.window, return_complex=True).abs().clamp(min=1e-7)
        y_mag = torch.stft(y, self.fft_size, self.shift_size, window=self.window, return_complex=True).abs().clamp(min=1e-7)
        sc_loss = torch.norm(y_mag - x_mag, p="fro") / torch.norm(y_mag, p="fro")
        mag_loss = F.l1_loss(torch.log(y_mag), torch.log(x_mag))
        return sc_loss, mag_loss


class Trainer(object):
    def __init__(self, data_loader, model, criterion, optimizer, config):
        self.steps = 0
        self.data_loader, self.model, self.criterion, self.optimizer, self.config = data_loader, model, criterion, optimizer, config
        self.total_train_loss = defaultdict(float)
        self.total_eval_loss = defaultdict(float)

    def _train_step(self, batch):
        z, c, y, _ = batch
        y_ = self.model["generator"](z, c)
        sc_loss, mag_loss = self.criterion["stft"](y_.squeeze(1), y.squeeze(1))
        p_ = self.model["discriminator"](y_)
        adv_loss = self.criterion["mse"](p_, p_.new_ones(p_.size()))
        gen_loss = sc_loss + mag_loss + self.config["lambda_adv"] * adv_loss
        self.total_train_loss["train/generator_loss"] += gen_loss.item()
        self.optimizer["generator"].zero_grad()
        gen_loss.backward()
        self.optimizer["generator"].step()

        p = self.model["discriminator"](y)
        p_ = self.model["discriminator"](y_.detach())
        dis_loss = self.criterion["mse"](p, p.new_ones(p.size())) + self.criterion["mse"](p_, p_.new_zeros(p_.size()))
        self.total_train_loss["train/discriminator_loss"] += dis_loss.item()
        self.optimizer["discriminator"].zero_grad()
        dis_loss.backward()
        self.optimizer["discriminator"].step()
        self.steps += 1

    def _eval_step(self, batch):
        z, c, y, _ = batch
        y_ = self.model["generator"](z, c)
        p_ = self.model["discriminator"](y_)
        y, y_, p_ = y.squeeze(1), y_.squeeze(1), p_.squeeze(1)
        adv_loss = self.criterion["mse"](p_, p_.new_ones(p_.size()))
        sc_loss, mag_loss = self.criterion["stft"](y_, y)
        aux_loss = sc_loss + mag_loss
        gen_loss = aux_loss + self.config["lambda_adv"] * adv_loss

        p = self.model["discriminator"](y.unsqueeze(1)).squeeze(1)
        p_ = self.model["discriminator"](y_.unsqueeze(1)).squeeze(1)
        real_loss = self.criterion["mse"](p, p.new_ones(p.size()))
        fake_loss = self.criterion["mse"](p_, p_.new_zeros(p_.size()))
        dis_loss = real_loss + fake_loss

        self.total_eval_loss["eval/adversarial_loss"] += adv_loss.item()
        self.total_eval_loss["eval/spectral_convergence_loss"] += sc_loss.item()
        self.total_eval_loss["eval/log_stft_magnitude_loss"] += mag_loss.item()
        self.total_eval_loss["eval/generator_loss"] += gen_loss.item()
        self.total_eval_loss["eval/real_loss"] += real_loss.item()
        self.total_eval_loss["eval/fake_loss"] += fake_loss.item()
        self.total_eval_loss["eval/discriminator_loss"] += dis_loss.item()

    def _eval_epoch(self):
        for key in self.model.keys():
            self.model[key].eval()
        for eval_steps_per_epoch, batch in enumerate(self.data_loader["dev"], 1):
            self._eval_step(batch)
        for key in self.total_eval_loss.keys():
            self.total_eval_loss[key] /= eval_steps_per_epoch
        print(f"(steps: {self.steps}) eval/generator_loss = {self.total_eval_loss['eval/generator_loss']:.4f}")
        self.total_eval_loss = defaultdict(float)
        for key in self.model.keys():
            self.model[key].train()

    def run(self):
        for batch in self.data_loader["train"]:
            self._train_step(batch)
            if self.steps % self.config["eval_interval_steps"] == 0:
                self._eval_epoch()


def make_batches(n, batch_size=4, frames=32, hop=64):
    return [(torch.randn(batch_size, 1, frames * hop), torch.randn(batch_size, 20, frames),
             torch.randn(batch_size, 1, frames * hop), None) for _ in range(n)]


model = {"generator": Generator(), "discriminator": Discriminator()}
criterion = {"stft": STFTLoss(), "mse": nn.MSELoss()}
optimizer = {k: torch.optim.Adam(m.parameters(), lr=1e-4) for k, m in model.items()}
trainer = Trainer({"train": make_batches(60), "dev": make_batches(10)}, model, criterion, optimizer,
                  {"lambda_adv": 4.0, "eval_interval_steps": 20})
trainer.run()
