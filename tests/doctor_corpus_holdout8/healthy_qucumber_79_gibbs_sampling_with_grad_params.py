# Source: https://github.com/PIQuIL/QuCumber/issues/79
#   code: qucumber/rbm/binary_rbm.py (BinaryRBM) at 55e9365, the state of the repository
#   when the issue was opened
# Adapted: BinaryRBM kept as it is (docstrings dropped; _warn_on_missing_gpu copied from
#   qucumber/__init__.py); the sampling the issue is about run as the sampling tutorial
#   does: an RBM of 10 visible and 10 hidden units (random parameters instead of trained
#   ones) draws 300 batches of 500 samples with k=10 block Gibbs steps from random initial
#   states, and the magnetization of each batch is recorded as a number; gpu=False, cpu,
#   seeded.
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector


def _warn_on_missing_gpu(gpu):
    if gpu and not torch.cuda.is_available():
        warnings.warn("Could not find GPU: will continue with CPU.", ResourceWarning)


class BinaryRBM(nn.Module):
    def __init__(self, num_visible, num_hidden, zero_weights=False, gpu=True):
        super(BinaryRBM, self).__init__()
        self.num_visible = int(num_visible)
        self.num_hidden = int(num_hidden)
        self.num_pars = (
            (self.num_visible * self.num_hidden) + self.num_visible + self.num_hidden
        )

        _warn_on_missing_gpu(gpu)
        self.gpu = gpu and torch.cuda.is_available()

        self.device = torch.device("cuda") if self.gpu else torch.device("cpu")

        self.initialize_parameters(zero_weights=zero_weights)

    def __repr__(self):
        return "BinaryRBM(num_visible={}, num_hidden={}, gpu={})".format(
            self.num_visible, self.num_hidden, self.gpu
        )

    def initialize_parameters(self, zero_weights=False):

        gen_tensor = torch.zeros if zero_weights else torch.randn
        self.weights = nn.Parameter(
            (
                gen_tensor(
                    self.num_hidden,
                    self.num_visible,
                    device=self.device,
                    dtype=torch.double,
                )
                / np.sqrt(self.num_visible)
            ),
            requires_grad=True,
        )

        self.visible_bias = nn.Parameter(
            torch.zeros(self.num_visible, device=self.device, dtype=torch.double),
            requires_grad=True,
        )
        self.hidden_bias = nn.Parameter(
            torch.zeros(self.num_hidden, device=self.device, dtype=torch.double),
            requires_grad=True,
        )

    def effective_energy(self, v):
        v = v.to(self.weights)
        if len(v.shape) < 2:
            v = v.unsqueeze(0)

        visible_bias_term = torch.mv(v, self.visible_bias)
        hid_bias_term = F.softplus(F.linear(v, self.weights, self.hidden_bias)).sum(1)

        return -(visible_bias_term + hid_bias_term)

    def effective_energy_gradient(self, v):
        v = v.to(self.weights)
        prob = self.prob_h_given_v(v)

        if v.dim() < 2:
            W_grad = -torch.einsum("j,k->jk", (prob, v))
            vb_grad = -v
            hb_grad = -prob
        else:
            W_grad = -torch.matmul(prob.t(), v)
            vb_grad = -torch.sum(v, 0)
            hb_grad = -torch.sum(prob, 0)

        return parameters_to_vector([W_grad, vb_grad, hb_grad])

    def prob_v_given_h(self, h, out=None):
        if h.dim() < 2:  # create extra axis, if needed
            h = h.unsqueeze(0)
            unsqueezed = True
        else:
            unsqueezed = False

        p = torch.addmm(
            self.visible_bias.data, h, self.weights.data, out=out
        ).sigmoid_()

        if unsqueezed:
            return p.squeeze_(0)  # remove superfluous axis, if it exists
        else:
            return p

    def prob_h_given_v(self, v, out=None):
        if v.dim() < 2:  # create extra axis, if needed
            v = v.unsqueeze(0)
            unsqueezed = True
        else:
            unsqueezed = False

        p = torch.addmm(
            self.hidden_bias.data, v, self.weights.data.t(), out=out
        ).sigmoid_()

        if unsqueezed:
            return p.squeeze_(0)  # remove superfluous axis, if it exists
        else:
            return p

    def sample_v_given_h(self, h, out=None):
        v = self.prob_v_given_h(h, out=out)
        v = v.copy_(v.bernoulli())  # overwrite v with its sample
        return v

    def sample_h_given_v(self, v, out=None):
        h = self.prob_h_given_v(v, out=out)
        h = h.copy_(h.bernoulli())  # overwrite h with its sample
        return h

    def gibbs_steps(self, k, initial_state, overwrite=False):
        v = initial_state.to(device=self.device, dtype=torch.double)

        if overwrite is False:
            v = v.clone()

        h = torch.zeros(
            v.shape[0], self.num_hidden, device=self.device, dtype=torch.double
        )

        for _ in range(k):
            self.sample_h_given_v(v, out=h)
            self.sample_v_given_h(h, out=v)

        return v

    def partition(self, space):
        neg_free_energies = -self.effective_energy(space)
        logZ = neg_free_energies.logsumexp(0)
        return logZ.exp()


torch.manual_seed(0)
rbm = BinaryRBM(10, 10, gpu=False)
magnetizations = []
for i in range(300):
    initial_state = torch.bernoulli(torch.full((500, 10), 0.5, dtype=torch.double))
    samples = rbm.gibbs_steps(10, initial_state, overwrite=True)
    magnetizations.append((2 * samples - 1).mean().item())
print(np.mean(magnetizations), np.std(magnetizations))
