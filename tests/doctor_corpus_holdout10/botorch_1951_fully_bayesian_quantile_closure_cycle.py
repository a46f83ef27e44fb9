# Source: https://github.com/pytorch/botorch/pull/1951
#   code: botorch/posteriors/fully_bayesian.py (FullyBayesianPosterior, batched_bisect) at the
#   parent of commit 793c3bd
# Adapted: FullyBayesianPosterior kept as it was before the fix (the lru_cache'd _quantile
#   closure over self stored on the instance, the mixture moments cached in attributes);
#   GPyTorchPosterior and the MultivariateNormal -> small stand-ins holding the mean, the
#   variance and the root of the cross-covariance as GPyTorch's lazy covariance does; the SAAS
#   fully Bayesian GP -> 16 fixed MCMC samples of RBF hyperparameters on 20 training points;
#   the Bayesian optimization loop calls model.posterior on 1024 random candidates per
#   iteration, scores them with an upper confidence bound on the mixture and adds the best
#   one to the data; 60 iterations; cpu, seeded.
from functools import lru_cache
from typing import Callable, Optional

import torch
from torch import Tensor


MCMC_DIM = -3  # Location of the MCMC batch dimension
TOL = 1e-6  # Bisection tolerance


def batched_bisect(
    f: Callable, target: float, bounds: Tensor, tol: float = TOL, max_steps: int = 32
):
    f1, f2 = f(bounds[0]), f(bounds[1])
    if not ((f1 <= target) & (target <= f2)).all():
        raise ValueError(
            "The target is not contained in the interval specified by the bounds"
        )
    bounds = bounds.clone()  # Will be modified in-place
    center = bounds.mean(dim=0)
    f_center = f(center)
    for _ in range(max_steps):
        go_left = f_center > target
        bounds[1, go_left] = center[go_left]
        bounds[0, ~go_left] = center[~go_left]
        center = bounds.mean(dim=0)
        f_center = f(center)
        if (f_center - target).abs().max() <= tol:
            return center
    return center


class MultivariateNormal:
    def __init__(self, mean, variance, covar_root):
        self.mean = mean
        self.variance = variance
        self.covar_root = covar_root  # the lazy covariance keeps K_xX K_XX^-1/2


class GPyTorchPosterior:
    def __init__(self, distribution):
        self.distribution = distribution
        self._is_mt = False

    @property
    def mean(self):
        return self.distribution.mean.unsqueeze(-1)

    @property
    def variance(self):
        return self.distribution.variance.unsqueeze(-1)


class FullyBayesianPosterior(GPyTorchPosterior):
    def __init__(self, distribution: MultivariateNormal) -> None:
        super().__init__(distribution=distribution)
        self._mean = (
            distribution.mean if self._is_mt else distribution.mean.unsqueeze(-1)
        )
        self._variance = (
            distribution.variance
            if self._is_mt
            else distribution.variance.unsqueeze(-1)
        )

        self._mixture_mean: Optional[Tensor] = None
        self._mixture_variance: Optional[Tensor] = None

        # quantiles are computed by a function defined here and cached with lru_cache,
        # to be called by self.quantile
        @lru_cache
        def _quantile(value: Tensor) -> Tensor:
            r"""Compute the posterior quantiles for the mixture of models."""
            if value.numel() > 1:
                return torch.stack([self.quantile(v) for v in value], dim=0)
            if value <= 0 or value >= 1:
                raise ValueError("value is expected to be in the range (0, 1).")
            dist = torch.distributions.Normal(loc=self.mean, scale=self.variance.sqrt())
            if self.mean.shape[MCMC_DIM] == 1:  # Analytical solution
                return dist.icdf(value).squeeze(MCMC_DIM)
            icdf_val = dist.icdf(value)
            low = icdf_val.min(dim=MCMC_DIM).values - TOL
            high = icdf_val.max(dim=MCMC_DIM).values + TOL
            bounds = torch.cat((low.unsqueeze(0), high.unsqueeze(0)), dim=0)
            return batched_bisect(
                f=lambda x: dist.cdf(x.unsqueeze(MCMC_DIM)).mean(dim=MCMC_DIM),
                target=value.item(),
                bounds=bounds,
            )

        self._quantile = _quantile

    @property
    def mixture_mean(self) -> Tensor:
        r"""The posterior mean for the mixture of models."""
        if self._mixture_mean is None:
            self._mixture_mean = self._mean.mean(dim=MCMC_DIM)
        return self._mixture_mean

    @property
    def mixture_variance(self) -> Tensor:
        r"""The posterior variance for the mixture of models."""
        if self._mixture_variance is None:
            num_mcmc_samples = self.mean.shape[MCMC_DIM]
            t1 = self._variance.sum(dim=MCMC_DIM) / num_mcmc_samples
            t2 = self._mean.pow(2).sum(dim=MCMC_DIM) / num_mcmc_samples
            t3 = -(self._mean.sum(dim=MCMC_DIM) / num_mcmc_samples).pow(2)
            self._mixture_variance = t1 + t2 + t3
        return self._mixture_variance

    def quantile(self, value: Tensor) -> Tensor:
        r"""Compute the posterior quantiles for the mixture of models."""
        return self._quantile(value)


class SaasFullyBayesianGP:
    """16 MCMC samples of (lengthscale, outputscale, noise), one GP per sample."""

    def __init__(self, train_X, train_Y, num_mcmc=16):
        self.train_X, self.train_Y = train_X, train_Y
        self.lengthscale = torch.rand(num_mcmc, 1, train_X.shape[-1]) * 0.5 + 0.1
        self.outputscale = torch.rand(num_mcmc, 1, 1) + 0.5
        self.noise = torch.full((num_mcmc, 1, 1), 1e-3)

    def kernel(self, a, b):
        a = a / self.lengthscale
        b = b / self.lengthscale
        return self.outputscale * torch.exp(-0.5 * torch.cdist(a, b).pow(2))

    def posterior(self, X):
        X = X.unsqueeze(0)
        Xt = self.train_X.unsqueeze(0)
        K = self.kernel(Xt, Xt) + self.noise * torch.eye(Xt.shape[-2])
        L = torch.linalg.cholesky(K)
        K_xX = self.kernel(X, Xt)
        root = torch.linalg.solve_triangular(L, K_xX.transpose(-1, -2), upper=False)
        alpha = torch.cholesky_solve(self.train_Y.unsqueeze(0), L)
        mean = (K_xX @ alpha).squeeze(-1)
        variance = (self.outputscale.squeeze(-1) - root.pow(2).sum(-2)).clamp_min(1e-9)
        return FullyBayesianPosterior(
            MultivariateNormal(mean, variance, root.transpose(-1, -2))
        )


def objective(X):
    return torch.sin(6 * X).sum(-1, keepdim=True) - (X - 0.5).pow(2).sum(-1, keepdim=True)


torch.manual_seed(0)
dim = 6
train_X = torch.rand(20, dim)
train_Y = objective(train_X)
model = SaasFullyBayesianGP(train_X, train_Y)
beta = 2.0

for iteration in range(60):
    candidates = torch.rand(1024, dim)
    posterior = model.posterior(candidates)
    ucb = posterior.mixture_mean + beta * posterior.mixture_variance.sqrt()
    best = ucb.squeeze(-1).argmax()
    x_next = candidates[best : best + 1]
    y_next = objective(x_next)
    if iteration % 10 == 0:
        print(f"iteration {iteration}: ucb {ucb.max().item():.3f} y {y_next.item():.3f}")
    train_X = torch.cat([train_X, x_next])
    train_Y = torch.cat([train_Y, y_next])
    model.train_X, model.train_Y = train_X, train_Y
