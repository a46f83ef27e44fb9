# Source: https://github.com/StanfordASL/neural-network-lyapunov/pull/140
#   code: robust_value_approx/line_search_gd.py and TrainLyapunovReLU.train_with_line_search in
#   robust_value_approx/train_lyapunov.py at a0fdc70^ (the parent of the fix)
# Adapted: total_loss solves no MIPs (gurobi): the two "MIP costs" are the worst sample
#   violations, the losses are sample losses of a ReLU Lyapunov candidate for a linear system;
#   p.data.add_(t, d_p) -> add_(d_p, alpha=t) (the old overload is gone); 40 iterations.
import torch
from torch.optim.optimizer import Optimizer, required


class LineSearchGD(Optimizer):
    r"""Implements gradient descent (optionally with momentum) with line search
    to find the step size. In each iteration, the step size should satisfy
    Armijo's rule
    f(x+αp) ≤ f(x)+c₁αpᵀ∇ₓf
    where α is the step size.
    """

    def __init__(self, params, lr=required, momentum=0, dampening=0,
                 weight_decay=0, nesterov=False, min_step_size=1e-8,
                 loss_minimal_decrement=1e-4, step_size_reduction=0.2):
        if lr is not required and lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")

        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov,
                        min_step_size=min_step_size,
                        loss_minimal_decrement=loss_minimal_decrement,
                        step_size_reduction=step_size_reduction)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                "Nesterov momentum requires a momentum and zero dampening")
        super(LineSearchGD, self).__init__(params, defaults)

    def __setstate__(self, state):
        super(LineSearchGD, self).__setstate__(state)
        for group in self.param_groups:
            group.setdefault('nesterov', False)

    def add_grad(self, p, t, d_p):
        p.data.add_(d_p, alpha=t)

    def directional_evaluate(self, closure, p, t, d_p):
        for i in range(len(p)):
            self.add_grad(p[i], t, d_p[i])
        loss = closure()
        return loss

    def line_search(self, loss0, closure, p, t, d_p):
        for group in self.param_groups:
            loss_minimal_decrement = group['loss_minimal_decrement']
            step_size_reduction = group['step_size_reduction']
            min_step_size = group['min_step_size']

        increment = loss_minimal_decrement * torch.sum(torch.stack(
            [torch.sum(p[i].grad * d_p[i]) for i in range(len(p))]))
        t_prev = 0
        while t > min_step_size:
            loss = self.directional_evaluate(closure, p, t - t_prev, d_p)
            if loss[0] <= loss0[0] + t * increment:
                return loss
            t_prev = t
            t *= step_size_reduction
        return loss

    def step(self, closure, loss0):
        p_all = []
        dp_all = []
        for group in self.param_groups:
            weight_decay = group['weight_decay']
            momentum = group['momentum']
            dampening = group['dampening']
            nesterov = group['nesterov']
            lr = group['lr']

            for p in group['params']:
                if p.grad is None:
                    continue
                d_p = p.grad.data
                if weight_decay != 0:
                    d_p.add_(p.data, alpha=weight_decay)
                if momentum != 0:
                    param_state = self.state[p]
                    if 'momentum_buffer' not in param_state:
                        buf = param_state['momentum_buffer'] = \
                            torch.clone(d_p).detach()
                    else:
                        buf = param_state['momentum_buffer']
                        buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                    if nesterov:
                        d_p = d_p.add(buf, alpha=momentum)
                    else:
                        d_p = buf
                p_all.append(p)
                dp_all.append(-d_p)
        loss = self.line_search(loss0, closure, p_all, lr, dp_all)
        return loss


class LinearSystem:
    def __init__(self, A):
        self.A = A
        self.x_dim = A.shape[0]

    def step_forward(self, x):
        return self.A @ x


class TrainLyapunovReLU:
    def __init__(self, system, V_rho=0.1, max_iterations=40):
        self.system = system
        self.V_rho = V_rho
        self.learning_rate = 0.02
        self.momentum = 0.5
        self.max_iterations = max_iterations
        self.lyapunov_positivity_convergence_tol = -1.0
        self.lyapunov_derivative_convergence_tol = -1.0
        self.summary_writer_folder = None

    def lyapunov_value(self, relu, x):
        return relu(x).squeeze(-1) - relu(torch.zeros_like(x)).squeeze(-1) + \
            self.V_rho * x.abs().sum(dim=-1)

    def total_loss(self, relu, state_samples_all, state_samples_next):
        v = self.lyapunov_value(relu, state_samples_all)
        v_next = self.lyapunov_value(relu, state_samples_next)
        positivity_violation = torch.relu(0.01 * state_samples_all.abs().sum(dim=-1) - v)
        derivative_violation = torch.relu(v_next - v + 0.01 * v)
        positivity_sample_loss = positivity_violation.mean()
        derivative_sample_loss = derivative_violation.mean()
        positivity_mip_loss = positivity_violation.max()
        derivative_mip_loss = derivative_violation.max()
        loss = positivity_sample_loss + derivative_sample_loss + \
            positivity_mip_loss + derivative_mip_loss
        return loss, positivity_violation.max().item(),\
            derivative_violation.max().item(),\
            positivity_sample_loss, derivative_sample_loss,\
            positivity_mip_loss, derivative_mip_loss

    def train_with_line_search(self, relu, state_samples_all):
        assert(isinstance(state_samples_all, torch.Tensor))
        assert(
            state_samples_all.shape[1] ==
            self.system.x_dim)
        state_samples_next = torch.stack([
            self.system.step_forward(
                state_samples_all[i]) for i in
            range(state_samples_all.shape[0])], dim=0)
        lyapunov_positivity_mip_costs = [None] * self.max_iterations
        lyapunov_derivative_mip_costs = [None] * self.max_iterations
        losses = [None] * self.max_iterations

        def closure():
            return self.total_loss(relu, state_samples_all, state_samples_next)

        losses[0], lyapunov_positivity_mip_costs[0],\
            lyapunov_derivative_mip_costs[0], _, _, _, _ = closure()
        iter_count = 1
        optimizer = LineSearchGD(
            relu.parameters(), lr=self.learning_rate, momentum=self.momentum,
            min_step_size=1e-8, loss_minimal_decrement=-1e-4,
            step_size_reduction=0.2)
        while iter_count < self.max_iterations:
            optimizer.zero_grad()
            losses[iter_count-1].backward()
            losses[iter_count], lyapunov_positivity_mip_costs[iter_count],\
                lyapunov_derivative_mip_costs[iter_count], _, _, _, _ = \
                optimizer.step(closure, [losses[iter_count-1]])
            if lyapunov_positivity_mip_costs[iter_count] < \
                self.lyapunov_positivity_convergence_tol and \
                lyapunov_derivative_mip_costs[iter_count] < \
                    self.lyapunov_derivative_convergence_tol:
                return True
            print(f"iter {iter_count}, loss {losses[iter_count].item()}," +
                  f"positivity mip cost " +
                  f"{lyapunov_positivity_mip_costs[iter_count]}, derivative " +
                  f"mip cost {lyapunov_derivative_mip_costs[iter_count]}")
            iter_count += 1
        return False


if __name__ == "__main__":
    torch.manual_seed(0)
    dtype = torch.float64
    system = LinearSystem(torch.tensor([[0.9, 0.2], [-0.1, 0.8]], dtype=dtype))
    relu = torch.nn.Sequential(
        torch.nn.Linear(2, 64), torch.nn.LeakyReLU(0.1), torch.nn.Linear(64, 64),
        torch.nn.LeakyReLU(0.1), torch.nn.Linear(64, 1)).type(dtype)
    state_samples_all = torch.rand(2000, 2, dtype=dtype) * 2 - 1
    dut = TrainLyapunovReLU(system)
    dut.train_with_line_search(relu, state_samples_all)
