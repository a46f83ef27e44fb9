# Source: https://github.com/pyro-ppl/pyro/pull/1049
#   code: pyro/distributions/omt_mvn.py (OMTMultivariateNormal, _OMTMVNSample) before the
#   pull request
# Adapted: pyro's MultivariateNormal wrapper replaced by torch.distributions'
#   MultivariateNormal and pyro.distributions.util.sum_leftmost by a two-line equivalent;
#   torch.trtrs (removed from torch) -> torch.linalg.solve_triangular, identity built with
#   torch.eye, pyro's `params` -> `arg_constraints` (the name torch.distributions
#   reads); the usage (a reparameterised fit of loc and scale_tril to a fixed quadratic
#   target with Adam, 300 steps of 64 samples in 5 dimensions) added, cpu, seeded.
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable
from torch.distributions import MultivariateNormal, constraints


def sum_leftmost(value, dim):
    dim = dim + value.dim() if dim < 0 else dim
    return value.reshape(-1, *value.shape[dim:]).sum(0)


class OMTMultivariateNormal(MultivariateNormal):
    arg_constraints = {"loc": constraints.real_vector, "scale_tril": constraints.lower_cholesky}

    def __init__(self, loc, scale_tril):
        assert(loc.dim() == 1), "OMTMultivariateNormal loc must be 1-dimensional"
        assert(scale_tril.dim() == 2), "OMTMultivariateNormal scale_tril must be 2-dimensional"
        covariance_matrix = torch.mm(scale_tril, scale_tril.t())
        super(OMTMultivariateNormal, self).__init__(loc, covariance_matrix)
        self.scale_tril = scale_tril

    def rsample(self, sample_shape=torch.Size()):
        return _OMTMVNSample.apply(self.loc, self.scale_tril, sample_shape + self.loc.shape)


class _OMTMVNSample(Function):
    @staticmethod
    def forward(ctx, loc, scale_tril, shape):
        ctx.white = loc.new(shape).normal_()
        ctx.z = torch.matmul(ctx.white, scale_tril.t())
        ctx.save_for_backward(scale_tril)
        return loc + ctx.z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        jitter = 1.0e-8
        L, = ctx.saved_tensors
        z = ctx.z
        epsilon = ctx.white

        dim = L.size(0)
        g = grad_output
        loc_grad = sum_leftmost(grad_output, -1)

        identity = torch.eye(dim, dtype=g.dtype)
        R_inv = torch.linalg.solve_triangular(L.t(), identity, upper=True)

        z_ja = z.unsqueeze(-1)
        g_R_inv = torch.matmul(g, R_inv).unsqueeze(-2)
        epsilon_jb = epsilon.unsqueeze(-2)
        g_ja = g.unsqueeze(-1)
        diff_L_ab = 0.5 * sum_leftmost(g_ja * epsilon_jb + g_R_inv * z_ja, -2)

        Sigma_inv = torch.mm(R_inv, R_inv.t())
        V, D, _ = torch.svd(Sigma_inv + jitter)
        D_outer = D.unsqueeze(-1) + D.unsqueeze(0)

        expand_tuple = tuple([-1] * (z.dim() - 1) + [dim, dim])
        z_tilde = identity * torch.matmul(z, V).unsqueeze(-1).expand(*expand_tuple)
        g_tilde = identity * torch.matmul(g, V).unsqueeze(-1).expand(*expand_tuple)

        Y = sum_leftmost(torch.matmul(z_tilde, torch.matmul(1.0 / D_outer, g_tilde)), -2)
        Y = torch.mm(V, torch.mm(Y, V.t()))
        Y = Y + Y.t()

        Tr_xi_Y = torch.mm(torch.mm(Sigma_inv, Y), R_inv) - torch.mm(Y, torch.mm(Sigma_inv, R_inv))
        diff_L_ab += 0.5 * Tr_xi_Y
        L_grad = torch.tril(diff_L_ab)

        return loc_grad, L_grad, None


if __name__ == "__main__":
    torch.manual_seed(0)
    D = 5
    target = torch.randn(D)
    A = torch.randn(D, D)
    precision = A @ A.t() + D * torch.eye(D)
    loc = torch.zeros(D, requires_grad=True)
    raw_scale = torch.zeros(D, D, requires_grad=True)
    optimizer = torch.optim.Adam([loc, raw_scale], lr=0.05)
    for step in range(300):
        scale_tril = torch.tril(raw_scale, -1) + torch.diag(torch.exp(torch.diagonal(raw_scale)))
        dist = OMTMultivariateNormal(loc, scale_tril)
        z = dist.rsample(torch.Size([64]))
        diff = z - target
        loss = 0.5 * ((diff @ precision) * diff).sum(-1).mean() - torch.diagonal(raw_scale).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(step, loss.item())
