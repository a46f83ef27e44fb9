# Source: https://github.com/devzhk/InverseBench/pull/22
#   code: LangevinDynamics and DAPS.inference of algo/daps.py before the pull request: the
#   anchor term (x - x0hat) / sigma ** 2 is added to the likelihood gradient from the leaf x
#   that requires grad, and the result, carrying a graph back to x, is assigned to x.grad
# Adapted: the EDM network replaced by a small convolutional denoiser with img_channels and
#   img_resolution; Scheduler and DiffusionSampler by minimal stand-ins (geometric sigma steps,
#   Euler steps of the probability-flow ODE); the forward operator by a fixed blur with the
#   gradient() InverseBench operators use (autograd on a detached copy); 3x96x96 images, 30
#   annealing steps of 10 Langevin steps; tqdm dropped; inference run on two observations;
#   cpu, seeded.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Scheduler:
    def __init__(self, num_steps=30, sigma_max=10.0, sigma_min=0.01):
        self.num_steps = num_steps
        self.sigma_max = sigma_max
        self.sigma_steps = list(np.geomspace(sigma_max, sigma_min, num_steps)) + [0.0]


class DiffusionSampler:
    def __init__(self, scheduler):
        self.scheduler = scheduler

    def sample(self, model, x_start, SDE=False, verbose=False):
        x = x_start
        for step in range(self.scheduler.num_steps):
            sigma, sigma_next = self.scheduler.sigma_steps[step], self.scheduler.sigma_steps[step + 1]
            d = (x - model(x, sigma)) / sigma
            x = x + (sigma_next - sigma) * d
        return x


class Denoiser(nn.Module):
    img_channels = 3
    img_resolution = 96

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(4, 32, 3, padding=1), nn.SiLU(), nn.Conv2d(32, 3, 3, padding=1))

    def forward(self, x, sigma):
        s = torch.full_like(x[:, :1], float(np.log(sigma)))
        return x + self.body(torch.cat([x, s], 1)) * sigma / (1 + sigma)


class Blur:
    device = torch.device('cpu')

    def __init__(self):
        self.kernel = torch.ones(3, 1, 5, 5) / 25

    def __call__(self, x):
        return F.conv2d(x, self.kernel, padding=2, groups=3)

    def loss(self, pred, observation):
        return (self(pred) - observation).pow(2).flatten(1).sum(-1)

    def gradient(self, pred, observation, return_loss=False):
        pred_tmp = pred.clone().detach().requires_grad_(True)
        loss = self.loss(pred_tmp, observation).sum()
        pred_grad = torch.autograd.grad(loss, pred_tmp)[0]
        return pred_grad


class LangevinDynamics:
    def __init__(self, num_steps, lr, tau=0.01, lr_min_ratio=0.01):
        super().__init__()
        self.num_steps = num_steps
        self.lr = lr
        self.tau = tau
        self.lr_min_ratio = lr_min_ratio

    def sample(self, x0hat, operator, measurement, sigma, ratio, verbose=False):
        pbar = range(self.num_steps)
        lr = self.get_lr(ratio)
        x = x0hat.clone().detach().requires_grad_(True)
        optimizer = torch.optim.SGD([x], lr)
        for _ in pbar:
            optimizer.zero_grad()

            gradient = operator.gradient(x, measurement) / (2 * self.tau ** 2)
            gradient += (x - x0hat) / sigma ** 2
            x.grad = gradient

            optimizer.step()
            with torch.no_grad():
                epsilon = torch.randn_like(x)
                x.data = x.data + np.sqrt(2 * lr) * epsilon

            # early stopping with NaN
            if torch.isnan(x).any():
                return torch.zeros_like(x)

        return x.detach()

    def get_lr(self, ratio):
        p = 1
        multiplier = (1 ** (1 / p) + ratio * (self.lr_min_ratio ** (1 / p) - 1 ** (1 / p))) ** p
        return multiplier * self.lr


class DAPS:
    def __init__(self, net, forward_op, annealing_scheduler_config={}, diffusion_scheduler_config={}, lgvd_config={}):
        self.net = net
        self.net.eval().requires_grad_(False)
        self.forward_op = forward_op
        self.annealing_scheduler = Scheduler(**annealing_scheduler_config)
        self.diffusion_scheduler_config = diffusion_scheduler_config
        self.lgvd = LangevinDynamics(**lgvd_config)

    def inference(self, observation, num_samples=1, verbose=True):
        device = self.forward_op.device
        pbar = range(self.annealing_scheduler.num_steps)
        xt = torch.randn(num_samples, self.net.img_channels, self.net.img_resolution, self.net.img_resolution, device=device) * self.annealing_scheduler.sigma_max
        for step in pbar:
            sigma = self.annealing_scheduler.sigma_steps[step]
            # 1. reverse diffusion
            diffusion_scheduler = Scheduler(**self.diffusion_scheduler_config, sigma_max=sigma)
            sampler = DiffusionSampler(diffusion_scheduler)
            x0hat = sampler.sample(self.net, xt, SDE=False, verbose=False)

            # 2. langevin dynamics
            x0y = self.lgvd.sample(x0hat, self.forward_op, observation, sigma, step / self.annealing_scheduler.num_steps)

            # 3. forward diffusion
            xt = x0y + torch.randn_like(x0y) * self.annealing_scheduler.sigma_steps[step + 1]

        return xt


torch.manual_seed(0)
forward_op = Blur()
daps = DAPS(Denoiser(), forward_op,
            annealing_scheduler_config=dict(num_steps=30, sigma_max=10.0, sigma_min=0.1),
            diffusion_scheduler_config=dict(num_steps=3, sigma_min=0.01),
            lgvd_config=dict(num_steps=10, lr=1e-4, tau=0.1))
for k in range(2):
    observation = forward_op(torch.rand(1, 3, 96, 96))
    recon = daps.inference(observation, num_samples=1)
    print(k, recon.shape, float(forward_op.loss(recon, observation)))
