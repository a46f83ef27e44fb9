# Source: https://github.com/deepinv/deepinv/pull/302
#   code: deepinv/optim/optimizers.py (BaseOptim.forward), deepinv/optim/fixed_point.py (FixedPoint.forward,
#         single_iteration), deepinv/optim/optim_iterators/optim_iterator.py and pgd.py at the parent of cb04f146
# Adapted: optim_builder is replaced by building BaseOptim directly with a PGD iterator, the L2 data
# fidelity, a PnP prior whose prox is a small DnCNN-style denoiser (random weights instead of a pretrained
# checkpoint) and a Gaussian blur physics written with conv2d; Anderson acceleration, metrics and tqdm are
# left out; 4 random 64x64 grey images are restored with 60 iterations each on CPU (no training).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Blur:
    def __init__(self, kernel):
        self.kernel = kernel

    def A(self, x):
        return F.conv2d(x, self.kernel, padding=self.kernel.shape[-1] // 2)

    def A_adjoint(self, y):
        return F.conv2d(y, self.kernel.flip(-1, -2), padding=self.kernel.shape[-1] // 2)


class L2:
    def grad(self, x, y, physics):
        return physics.A_adjoint(physics.A(x) - y)


class DnCNN(nn.Module):
    def __init__(self, channels=1, nf=32, depth=5):
        super().__init__()
        layers = [nn.Conv2d(channels, nf, 3, padding=1), nn.ReLU()]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(nf, nf, 3, padding=1), nn.ReLU()]
        layers += [nn.Conv2d(nf, channels, 3, padding=1)]
        self.net = nn.Sequential(*layers)

    def forward(self, x, sigma):
        return x - 0.1 * self.net(x)


class PnP:
    def __init__(self, denoiser):
        self.denoiser = denoiser

    def prox(self, x, *args, **kwargs):
        return self.denoiser(x, *args)


class PGDIteration(nn.Module):
    def __init__(self, g_first=False, F_fn=None, has_cost=False):
        super().__init__()
        self.g_first = g_first
        self.F_fn = F_fn
        self.has_cost = has_cost

    def f_step(self, x, cur_data_fidelity, cur_params, y, physics):
        grad = cur_params["stepsize"] * cur_data_fidelity.grad(x, y, physics)
        return x - grad

    def g_step(self, x, cur_prior, cur_params):
        return cur_prior.prox(x, cur_params["g_param"], gamma=cur_params["lambda"] * cur_params["stepsize"])

    def relaxation_step(self, u, v, beta):
        return beta * u + (1 - beta) * v

    def forward(self, X, cur_data_fidelity, cur_prior, cur_params, y, physics):
        x_prev = X["est"][0]
        if not self.g_first:
            z = self.f_step(x_prev, cur_data_fidelity, cur_params, y, physics)
            x = self.g_step(z, cur_prior, cur_params)
        else:
            z = self.g_step(x_prev, cur_prior, cur_params)
            x = self.f_step(z, cur_data_fidelity, cur_params, y, physics)
        x = self.relaxation_step(x, x_prev, cur_params["beta"])
        F_ = self.F_fn(x, cur_data_fidelity, cur_prior, cur_params, y, physics) if self.has_cost else None
        return {"est": (x, z), "cost": F_}


class FixedPoint(nn.Module):
    def __init__(self, iterator, update_params_fn, update_data_fidelity_fn, update_prior_fn,
                 init_iterate_fn, check_conv_fn, max_iter=60, early_stop=True):
        super().__init__()
        self.iterator = iterator
        self.update_params_fn = update_params_fn
        self.update_data_fidelity_fn = update_data_fidelity_fn
        self.update_prior_fn = update_prior_fn
        self.init_iterate_fn = init_iterate_fn
        self.check_conv_fn = check_conv_fn
        self.max_iter = max_iter
        self.early_stop = early_stop

    def forward(self, *args, compute_metrics=False, x_gt=None, **kwargs):
        X = self.init_iterate_fn(*args)
        it = 0
        for it in range(self.max_iter):
            X_prev = X
            X = self.single_iteration(X, it, *args, **kwargs)
            if self.early_stop and it > 1 and self.check_conv_fn(it, X_prev, X):
                break
        return X, None

    def single_iteration(self, X, it, *args, **kwargs):
        cur_params = self.update_params_fn(it)
        cur_data_fidelity = self.update_data_fidelity_fn(it)
        cur_prior = self.update_prior_fn(it)
        X_prev = X
        X = self.iterator(X_prev, cur_data_fidelity, cur_prior, cur_params, *args)
        return X


class BaseOptim(nn.Module):
    def __init__(self, iterator, data_fidelity, prior, params_algo, max_iter=60, thres_conv=1e-6):
        super().__init__()
        self.params_algo, self.data_fidelity, self.prior, self.thres_conv = params_algo, data_fidelity, prior, thres_conv
        self.fixed_point = FixedPoint(iterator, self.update_params_fn, lambda it: self.data_fidelity,
                                      lambda it: self.prior, self.init_iterate_fn, self.check_conv_fn,
                                      max_iter=max_iter)

    def update_params_fn(self, it):
        return {key: value[min(it, len(value) - 1)] for key, value in self.params_algo.items()}

    def init_iterate_fn(self, y, physics):
        x_init = physics.A_adjoint(y)
        return {"est": (x_init, x_init), "cost": None}

    def check_conv_fn(self, it, X_prev, X):
        x_prev, x = X_prev["est"][0], X["est"][0]
        crit_cur = ((x_prev - x).norm() / (x.norm() + 1e-06)).item()
        return crit_cur < self.thres_conv

    def get_output(self, X):
        return X["est"][0]

    def forward(self, y, physics, x_gt=None, compute_metrics=False):
        X, metrics = self.fixed_point(y, physics, x_gt=x_gt, compute_metrics=compute_metrics)
        x = self.get_output(X)
        if compute_metrics:
            return x, metrics
        else:
            return x


g = torch.exp(-torch.arange(-3.0, 4.0) ** 2 / 4)
physics = Blur((g[:, None] * g[None, :] / (g.sum() ** 2))[None, None])
params_algo = {"stepsize": [1.0], "g_param": [0.05], "lambda": [1.0], "beta": [1.0]}
model = BaseOptim(PGDIteration(), L2(), PnP(DnCNN()), params_algo, max_iter=60)

psnrs = []
for i in range(4):
    x_gt = torch.rand(1, 1, 64, 64)
    y = physics.A(x_gt) + 0.03 * torch.randn(1, 1, 64, 64)
    x_hat = model(y, physics)
    psnrs.append((-10 * torch.log10(((x_hat - x_gt) ** 2).mean())).item())
    print(f"image {i}: PSNR {psnrs[-1]:.2f} dB")
