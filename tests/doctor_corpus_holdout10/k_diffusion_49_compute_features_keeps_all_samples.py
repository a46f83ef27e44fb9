# Source: https://github.com/crowsonkb/k-diffusion/issues/49
#   code: sample.py (main/run), k_diffusion/evaluation.py (compute_features),
#   k_diffusion/sampling.py (get_sigmas_karras, to_d, linear_multistep_coeff, sample_lms) and
#   k_diffusion/layers.py (Denoiser) at commit 5b3af03
# Adapted: run(), sample_fn, compute_features, sample_lms and Denoiser kept as they are; the
#   accelerate.Accelerator -> a single-process stand-in whose gather returns its input; the
#   config/checkpoint -> a small untrained convolutional denoiser for 3x64x64 images
#   (sigma_data 0.5, sigma 0.01-80); the argparse options -> n=1024 images in batches of 64
#   with 8 steps; saving each image as a PNG -> converting it to a uint8 array in memory;
#   tqdm dropped; cpu, seeded.
import math

import numpy as np
import torch
import torch.nn as nn
from scipy import integrate


def append_dims(x, target_dims):
    """Appends dimensions to the end of a tensor until it has target_dims dimensions."""
    dims_to_append = target_dims - x.ndim
    if dims_to_append < 0:
        raise ValueError(f'input has {x.ndim} dims but target_dims is {target_dims}, which is less')
    return x[(...,) + (None,) * dims_to_append]


def append_zero(x):
    return torch.cat([x, x.new_zeros([1])])


def get_sigmas_karras(n, sigma_min, sigma_max, rho=7., device='cpu'):
    """Constructs the noise schedule of Karras et al. (2022)."""
    ramp = torch.linspace(0, 1, n)
    min_inv_rho = sigma_min ** (1 / rho)
    max_inv_rho = sigma_max ** (1 / rho)
    sigmas = (max_inv_rho + ramp * (min_inv_rho - max_inv_rho)) ** rho
    return append_zero(sigmas).to(device)


def to_d(x, sigma, denoised):
    """Converts a denoiser output to a Karras ODE derivative."""
    return (x - denoised) / append_dims(sigma, x.ndim)


def linear_multistep_coeff(order, t, i, j):
    if order - 1 > i:
        raise ValueError(f'Order {order} too high for step {i}')
    def fn(tau):
        prod = 1.
        for k in range(order):
            if j == k:
                continue
            prod *= (tau - t[i - k]) / (t[i - j] - t[i - k])
        return prod
    return integrate.quad(fn, t[i], t[i + 1], epsrel=1e-4)[0]


@torch.no_grad()
def sample_lms(model, x, sigmas, extra_args=None, callback=None, disable=None, order=4):
    extra_args = {} if extra_args is None else extra_args
    s_in = x.new_ones([x.shape[0]])
    sigmas_cpu = sigmas.detach().cpu().numpy()
    ds = []
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i] * s_in, **extra_args)
        d = to_d(x, sigmas[i], denoised)
        ds.append(d)
        if len(ds) > order:
            ds.pop(0)
        if callback is not None:
            callback({'x': x, 'i': i, 'sigma': sigmas[i], 'sigma_hat': sigmas[i], 'denoised': denoised})
        cur_order = min(i + 1, order)
        coeffs = [linear_multistep_coeff(cur_order, sigmas_cpu, i, j) for j in range(cur_order)]
        x = x + sum(coeff * d for coeff, d in zip(coeffs, reversed(ds)))
    return x


class Denoiser(nn.Module):
    """A Karras et al. preconditioner for denoising diffusion models."""

    def __init__(self, inner_model, sigma_data=1.):
        super().__init__()
        self.inner_model = inner_model
        self.sigma_data = sigma_data

    def get_scalings(self, sigma):
        c_skip = self.sigma_data ** 2 / (sigma ** 2 + self.sigma_data ** 2)
        c_out = sigma * self.sigma_data / (sigma ** 2 + self.sigma_data ** 2) ** 0.5
        c_in = 1 / (sigma ** 2 + self.sigma_data ** 2) ** 0.5
        return c_skip, c_out, c_in

    def forward(self, input, sigma, **kwargs):
        c_skip, c_out, c_in = [append_dims(x, input.ndim) for x in self.get_scalings(sigma)]
        return self.inner_model(input * c_in, sigma, **kwargs) * c_out + input * c_skip


class TinyInnerModel(nn.Module):
    def __init__(self, channels=3, width=32):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(channels + 1, width, 3, padding=1), nn.GELU(),
                                 nn.Conv2d(width, width, 3, padding=1), nn.GELU(),
                                 nn.Conv2d(width, channels, 3, padding=1))

    def forward(self, x, sigma):
        c_noise = sigma.log() / 4
        return self.net(torch.cat([x, append_dims(c_noise, x.ndim).expand(-1, 1, *x.shape[2:])], 1))


class Accelerator:
    num_processes = 1
    is_main_process = True
    is_local_main_process = True
    device = torch.device('cpu')

    def gather(self, tensor):
        return tensor


def compute_features(accelerator, sample_fn, extractor_fn, n, batch_size):
    n_per_proc = math.ceil(n / accelerator.num_processes)
    feats_all = []
    try:
        for i in range(0, n_per_proc, batch_size):
            cur_batch_size = min(n - i, batch_size)
            samples = sample_fn(cur_batch_size)[:cur_batch_size]
            feats_all.append(accelerator.gather(extractor_fn(samples)))
    except StopIteration:
        pass
    return torch.cat(feats_all)[:n]


def main():
    torch.manual_seed(0)
    batch_size, n, steps = 64, 1024, 8
    model_config = {'input_channels': 3, 'input_size': [64, 64], 'sigma_data': 0.5,
                    'sigma_min': 1e-2, 'sigma_max': 80}
    size = model_config['input_size']

    accelerator = Accelerator()
    device = accelerator.device
    inner_model = TinyInnerModel().eval().requires_grad_(False).to(device)
    model = Denoiser(inner_model, sigma_data=model_config['sigma_data'])

    sigma_min = model_config['sigma_min']
    sigma_max = model_config['sigma_max']

    @torch.no_grad()
    def run():
        sigmas = get_sigmas_karras(steps, sigma_min, sigma_max, rho=7., device=device)
        def sample_fn(n):
            x = torch.randn([n, model_config['input_channels'], size[0], size[1]], device=device) * sigma_max
            x_0 = sample_lms(model, x, sigmas, disable=not accelerator.is_local_main_process)
            return x_0
        x_0 = compute_features(accelerator, sample_fn, lambda x: x, n, batch_size)
        if accelerator.is_main_process:
            images = []
            for i, out in enumerate(x_0):
                images.append((out.clamp(-1, 1).add(1).mul(127.5)).byte().permute(1, 2, 0).numpy())
            print(len(images), 'images', np.mean([im.mean() for im in images]))

    run()


if __name__ == '__main__':
    main()
