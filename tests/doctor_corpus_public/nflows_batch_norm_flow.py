# Source: https://github.com/bayesiains/nflows/issues/10
#   code: the training loop, and BatchNorm from nflows/transforms/normalization.py at
#   36dcabc^ (the parent of the fix in https://github.com/bayesiains/nflows/pull/11)
# Adapted: no nflows/sklearn: BatchNorm is inlined (on nn.Module instead of nflows' Transform,
#   without the inverse and the typecheck); SimpleRealNVP is replaced by a small flow
#   of affine coupling layers with BatchNorm between them (batch_norm_between_layers=True),
#   a standard-normal base; the two moons are drawn with numpy; 60 iterations of 256 points.
import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F


class BatchNorm(nn.Module):
    """Transform that performs batch normalization.

    Limitations:
        * It works only for 1-dim inputs.
        * Inverse is not available in training mode, only in eval mode.
    """

    def __init__(self, features, eps=1e-5, momentum=0.1, affine=True):
        super().__init__()

        self.momentum = momentum
        self.eps = eps
        constant = np.log(np.exp(1 - eps) - 1)
        self.unconstrained_weight = nn.Parameter(constant * torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.zeros(features))

    @property
    def weight(self):
        return F.softplus(self.unconstrained_weight) + self.eps

    def forward(self, inputs, context=None):
        if inputs.dim() != 2:
            raise ValueError(
                "Expected 2-dim inputs, got inputs of shape: {}".format(inputs.shape)
            )

        if self.training:
            mean, var = inputs.mean(0), inputs.var(0)
            self.running_mean.mul_(1 - self.momentum).add_(mean * self.momentum)
            self.running_var.mul_(1 - self.momentum).add_(var * self.momentum)
        else:
            mean, var = self.running_mean, self.running_var

        outputs = (
            self.weight * ((inputs - mean) / torch.sqrt((var + self.eps))) + self.bias
        )

        logabsdet_ = torch.log(self.weight) - 0.5 * torch.log(var + self.eps)
        logabsdet = torch.sum(logabsdet_) * torch.ones(inputs.shape[0])

        return outputs, logabsdet


class AffineCoupling(nn.Module):
    def __init__(self, features, hidden_features, mask):
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = nn.Sequential(nn.Linear(features, hidden_features), nn.ReLU(),
                                 nn.Linear(hidden_features, 2 * features))

    def forward(self, inputs, context=None):
        scale, shift = self.net(inputs * self.mask).chunk(2, dim=-1)
        scale = torch.sigmoid(scale + 2) * (1 - self.mask) + self.mask
        outputs = inputs * scale + shift * (1 - self.mask)
        return outputs, torch.log(scale).sum(-1)


class SimpleRealNVP(nn.Module):
    def __init__(self, features, hidden_features, num_layers, num_blocks_per_layer,
                 batch_norm_between_layers=False):
        super().__init__()
        layers = []
        mask = torch.arange(features) % 2
        for _ in range(num_layers):
            layers.append(AffineCoupling(features, hidden_features, mask.float()))
            mask = 1 - mask
            if batch_norm_between_layers:
                layers.append(BatchNorm(features=features))
        self.layers = nn.ModuleList(layers)

    def log_prob(self, inputs):
        logabsdet = torch.zeros(inputs.shape[0])
        for layer in self.layers:
            inputs, step = layer(inputs)
            logabsdet = logabsdet + step
        base = -0.5 * (inputs ** 2).sum(-1) - 0.5 * inputs.shape[1] * np.log(2 * np.pi)
        return base + logabsdet


def make_moons(n_samples, noise, rng=np.random.RandomState(0)):
    outer = np.linspace(0, np.pi, n_samples // 2)
    inner = np.linspace(0, np.pi, n_samples - n_samples // 2)
    x = np.vstack([np.append(np.cos(outer), 1 - np.cos(inner)),
                   np.append(np.sin(outer), 1 - np.sin(inner) - .5)]).T
    return x + rng.normal(scale=noise, size=x.shape), None


torch.manual_seed(0)
flow = SimpleRealNVP(2, 32, 4, 2, batch_norm_between_layers=True)
optimizer = optim.Adam(flow.parameters())

num_iter = 60
for i in range(num_iter):
    x, y = make_moons(256, noise=.1)
    x = torch.tensor(x, dtype=torch.float32)
    optimizer.zero_grad()
    loss = -flow.log_prob(inputs=x).mean()
    loss.backward()
    optimizer.step()
print(loss.item())
