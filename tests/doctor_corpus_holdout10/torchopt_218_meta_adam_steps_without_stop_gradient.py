# Source: https://github.com/metaopt/torchopt/issues/218
#   code: torchopt/optim/meta/base.py (MetaOptimizer) and the Adam transformation behind
#   torchopt.MetaAdam at torchopt 0.7.3, the version of the report, and the report's loop of
#   repeated MetaAdam steps on one network
# Adapted: MetaOptimizer.step and add_param_group kept as they are; the pytree flattening,
#   extract_module_containers and the chained scale_by_adam/scale transformation written out
#   in a few lines with the same interface (init/update(grads, state, params, inplace=False),
#   the parameters held in each module's _parameters dict); torchopt is not installed. The
#   report's network and data -> a 3-layer MLP on random 64x32 inputs, 300 steps; cpu, seeded.
from typing import NamedTuple

import torch
import torch.nn as nn


class ScaleByAdamState(NamedTuple):
    mu: tuple
    nu: tuple
    count: int


class UninitializedState(NamedTuple):
    pass


class adam:
    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps

    def init(self, params):
        zeros = tuple(torch.zeros_like(p) for p in params)
        return ScaleByAdamState(mu=zeros, nu=zeros, count=0)

    def update(self, updates, state, *, params=None, inplace=True):
        mu = tuple(self.b1 * m + (1 - self.b1) * g for m, g in zip(state.mu, updates))
        nu = tuple(self.b2 * n + (1 - self.b2) * g * g for n, g in zip(state.nu, updates))
        count = state.count + 1
        mu_hat = tuple(m / (1 - self.b1 ** count) for m in mu)
        nu_hat = tuple(n / (1 - self.b2 ** count) for n in nu)
        new_updates = tuple(-self.lr * m / (n.sqrt() + self.eps) for m, n in zip(mu_hat, nu_hat))
        return new_updates, ScaleByAdamState(mu=mu, nu=nu, count=count)


def apply_updates(params, updates, *, inplace=True):
    return tuple(p + u for p, u in zip(params, updates))


def extract_module_containers(module, with_buffers=True):
    return tuple(m._parameters for m in module.modules() if m._parameters), ()


class MetaOptimizer:
    """The base class for high-level differentiable optimizers."""

    def __init__(self, module, impl):
        self.impl = impl
        self.param_containers_groups = []
        self.state_groups = []

        self.add_param_group(module)

    def step(self, loss):
        for i, (param_container, state) in enumerate(
            zip(self.param_containers_groups, self.state_groups),
        ):
            flat_params = tuple(p for container in param_container for p in container.values())
            if isinstance(state, UninitializedState):
                state = self.impl.init(flat_params)
            grads = torch.autograd.grad(
                loss,
                flat_params,
                create_graph=True,
                allow_unused=True,
            )
            updates, new_state = self.impl.update(
                grads,
                state,
                params=flat_params,
                inplace=False,
            )
            self.state_groups[i] = new_state
            flat_new_params = iter(apply_updates(flat_params, updates, inplace=False))
            for container in param_container:
                new_param = {name: next(flat_new_params) for name in container}
                container.update(new_param)

    def add_param_group(self, module):
        params_container = extract_module_containers(module, with_buffers=False)[0]
        self.param_containers_groups.append(params_container)
        self.state_groups.append(UninitializedState())


class MetaAdam(MetaOptimizer):
    def __init__(self, module, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(module, adam(lr=lr, betas=betas, eps=eps))


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
optim = MetaAdam(net, lr=1e-3)

for step in range(300):
    x = torch.randn(64, 32)
    y = torch.randn(64, 1)
    loss = ((net(x) - y) ** 2).mean()
    optim.step(loss)
    if step % 50 == 0:
        print(step, loss.item())
