# Source: https://github.com/cornellius-gp/gpytorch/pull/2734
# Adapted: gpytorch/utils/memoize.py (cached, add_to_cache, clear_cache_hook and their
#   helpers) and DefaultPredictionStrategy.mean_cache/_mean_cache/exact_predictive_mean of
#   gpytorch/models/exact_prediction_strategies.py at the parent of the fix (863b804), the
#   "ignore" NaN policy only; ExactGP, ConstantMean, RBFKernel, GaussianLikelihood,
#   linear_operator and get_fantasy_model are reduced to a small exact GP with the same
#   calls (the fantasy model is a new GP on the training data plus the fantasy points,
#   without the low-rank cache update); the pull request's reproduction loop (fantasy model,
#   then a prediction under detach_test_caches(False)) with 256 -> 128 training points,
#   200 -> 60 iterations, 32 fantasy points, cpu, seeded.
import contextlib
import functools
import pickle

import torch
from torch import Tensor, nn

torch.manual_seed(0)


class CachingError(RuntimeError):
    pass


def cached(method=None, name=None, ignore_args=False):
    """A decorator allowing for specifying the name of a cache, allowing it to be modified elsewhere."""
    return _cached(method=method, name=name)


def add_to_cache(obj, name, val, *args, **kwargs):
    """Add a result to the cache of an object (honoring calling args)."""
    return _add_to_cache(obj, name, val, *args, kwargs_pkl=pickle.dumps(kwargs))


def clear_cache_hook(module, *args, **kwargs):
    module._memoize_cache = {}


def _cached(method=None, name=None):
    if method is None:
        return functools.partial(_cached, name=name)

    @functools.wraps(method)
    def g(self, *args, **kwargs):
        cache_name = name if name is not None else method.__qualname__
        kwargs_pkl = pickle.dumps(kwargs)
        if not _is_in_cache(self, cache_name, *args, kwargs_pkl=kwargs_pkl):
            return _add_to_cache(self, cache_name, method(self, *args, **kwargs), *args, kwargs_pkl=kwargs_pkl)
        return _get_from_cache(self, cache_name, *args, kwargs_pkl=kwargs_pkl)

    return g


def _add_to_cache(obj, name, val, *args, kwargs_pkl):
    """Add a result to the cache of an object (honoring calling args)."""
    if not hasattr(obj, "_memoize_cache"):
        obj._memoize_cache = {}
    obj._memoize_cache[(name, args, kwargs_pkl)] = val
    return val


def _get_from_cache(obj, name, *args, kwargs_pkl):
    """Get an item from the cache (honoring calling args)."""
    try:
        return obj._memoize_cache[(name, args, kwargs_pkl)]
    except (AttributeError, KeyError):
        raise CachingError(f"Object does not have item {name} stored in cache.")


def _is_in_cache(obj, name, *args, kwargs_pkl):
    return hasattr(obj, "_memoize_cache") and (name, args, kwargs_pkl) in obj._memoize_cache


class settings:
    class detach_test_caches:
        _state = True

        def __init__(self, state=True):
            self.state = state

        @classmethod
        def on(cls):
            return cls._state

        def __enter__(self):
            self.prev = settings.detach_test_caches._state
            settings.detach_test_caches._state = self.state

        def __exit__(self, *args):
            settings.detach_test_caches._state = self.prev

    class observation_nan_policy:
        @staticmethod
        def value():
            return "ignore"


class DefaultPredictionStrategy:
    def __init__(self, train_inputs, train_prior_dist, train_labels, likelihood):
        self.train_inputs = train_inputs
        self.train_prior_dist = train_prior_dist
        self.train_labels = train_labels
        self.likelihood = likelihood
        self._last_test_train_covar = None

    @property
    def mean_cache(self):
        return self._mean_cache(settings.observation_nan_policy.value())

    @cached(name="mean_cache")
    def _mean_cache(self, nan_policy: str) -> Tensor:
        mvn = self.likelihood(self.train_prior_dist, self.train_inputs)
        train_mean, train_train_covar = mvn

        train_labels_offset = (self.train_labels - train_mean).unsqueeze(-1)

        if nan_policy == "ignore":
            mean_cache = torch.linalg.solve(train_train_covar, train_labels_offset).squeeze(-1)
        if settings.detach_test_caches.on():
            mean_cache = mean_cache.detach()

        if mean_cache.grad_fn is not None:
            wrapper = functools.partial(clear_cache_hook, self)
            functools.update_wrapper(wrapper, clear_cache_hook)
            mean_cache.grad_fn.register_hook(wrapper)

        return mean_cache

    def exact_predictive_mean(self, test_mean: Tensor, test_train_covar: Tensor) -> Tensor:
        mean_cache = self.mean_cache
        res = (test_train_covar @ mean_cache.unsqueeze(-1)).squeeze(-1)
        return res + test_mean


class GaussianLikelihood(nn.Module):
    def __init__(self):
        super().__init__()
        self.noise = nn.Parameter(torch.tensor(0.1, dtype=torch.double))

    def forward(self, prior, inputs):
        mean, covar = prior
        return mean, covar + self.noise * torch.eye(covar.shape[-1], dtype=covar.dtype)


class SimpleGP(nn.Module):
    def __init__(self, train_inputs, train_targets, likelihood=None):
        super().__init__()
        self.train_inputs, self.train_targets = train_inputs, train_targets
        self.likelihood = likelihood if likelihood is not None else GaussianLikelihood()
        self.constant = nn.Parameter(torch.zeros((), dtype=torch.double))
        self.lengthscale = nn.Parameter(torch.ones((), dtype=torch.double))
        self.prediction_strategy = None

    def kernel(self, x1, x2):
        return torch.exp(-0.5 * torch.cdist(x1, x2).pow(2) / self.lengthscale ** 2)

    def forward(self, x):
        return self.constant.expand(x.shape[0]), self.kernel(x, x)

    def __call__(self, x):
        if self.prediction_strategy is None:
            self.prediction_strategy = DefaultPredictionStrategy(
                self.train_inputs, self.forward(self.train_inputs), self.train_targets, self.likelihood)
        test_mean, _ = self.forward(x)
        test_train_covar = self.kernel(x, self.train_inputs)
        return self.prediction_strategy.exact_predictive_mean(test_mean, test_train_covar)

    def get_fantasy_model(self, inputs, targets):
        fantasy_model = SimpleGP(torch.cat([self.train_inputs, inputs]),
                                 torch.cat([self.train_targets, targets]), self.likelihood)
        fantasy_model.load_state_dict(self.state_dict())
        return fantasy_model


d = 10
gp = SimpleGP(
    train_inputs=torch.rand(128, d, dtype=torch.double),
    train_targets=torch.rand(128, dtype=torch.double),
).eval()
gp(torch.rand(5, d, dtype=torch.double))

X = torch.rand(32, d, dtype=torch.double)
Y = torch.rand(32, dtype=torch.double)

for i in range(60):
    fantasy_model = gp.get_fantasy_model(inputs=X, targets=Y).eval()
    with settings.detach_test_caches(False):
        fantasy_model(torch.rand(32, d, dtype=torch.double))
    if (i + 1) % 20 == 0:
        print(f"Iter {i+1}")
