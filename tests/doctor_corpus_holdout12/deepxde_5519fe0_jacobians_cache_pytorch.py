# Source: https://github.com/lululxvi/deepxde/commit/5519fe096f10eac52cf58e3dd7b9f6344bd207db
#   code: deepxde/gradients.py (Jacobian, Jacobians, jacobian) and the pytorch branch of
#   Model.compile / Model.train in deepxde/model.py at 5519fe09^, the parent of the commit
#   "Fix memory leak of grad in PyTorch"
# Adapted: Jacobian, Jacobians, jacobian and the pytorch compute_losses / outputs_losses /
#   train_step kept as they were (the tensorflow branches dropped); the backend module, the
#   FNN, dde.data.PDE with its geometry sampler and the training display replaced by small
#   stand-ins with the same calls (net(inputs), data.losses(targets, outputs, loss_fn, model),
#   train_state); the problem is the 1D Poisson equation -u'' = pi^2 sin(pi x) on [-1, 1]
#   with u(+-1) = 0, 64 domain points and 2 boundary points, an FNN [1, 32, 32, 1], Adam,
#   300 iterations, display every 100; cpu, float32, seeded.
import numpy as np
import torch

backend_name = "pytorch"


class Jacobian(object):
    """Compute Jacobian matrix J: J[i][j] = dy_i/dx_j, where i=0,...,dim_y-1 and j=0,...,dim_x-1.

    It is lazy evaluation, i.e., it only computes J[i][j] when needed.
    """

    def __init__(self, ys, xs):
        self.ys = ys
        self.xs = xs

        self.dim_y = ys.shape[1]
        self.dim_x = xs.shape[1]
        self.J = {}

    def __call__(self, i=0, j=None):
        if not 0 <= i < self.dim_y:
            raise ValueError("i={} is not valid.".format(i))
        if j is not None and not 0 <= j < self.dim_x:
            raise ValueError("j={} is not valid.".format(j))
        # Compute J[i]
        if i not in self.J:
            y = self.ys[:, i : i + 1] if self.dim_y > 1 else self.ys
            if backend_name == "pytorch":
                self.J[i] = torch.autograd.grad(
                    y, self.xs, grad_outputs=torch.ones_like(y), create_graph=True
                )[0]
        return self.J[i] if j is None or self.dim_x == 1 else self.J[i][:, j : j + 1]


class Jacobians(object):
    """Compute multiple Jacobians.

    A new instance will be created for a new pair of (output, input). For the (output, input) pair that has been
    computed before, it will reuse the previous instance, rather than creating a new one.
    """

    def __init__(self):
        self.Js = {}

    def __call__(self, ys, xs, i=0, j=None):
        if backend_name == "pytorch":
            key = (ys, xs)
        if key not in self.Js:
            self.Js[key] = Jacobian(ys, xs)
        return self.Js[key](i, j)


def jacobian(ys, xs, i=0, j=None):
    return jacobian._fn(ys, xs, i=i, j=j)


jacobian._fn = Jacobians()


def pde(x, y):
    dy_x = jacobian(y, x)
    dy_xx = jacobian(dy_x, x)
    return -dy_xx - np.pi ** 2 * torch.sin(np.pi * x)


class PDE:
    def __init__(self, pde, num_domain, seed=0):
        rng = np.random.default_rng(seed)
        self.pde = pde
        x_domain = rng.uniform(-1, 1, (num_domain, 1))
        self.train_x = np.vstack([np.array([[-1.0], [1.0]]), x_domain]).astype(np.float32)
        self.train_y = np.zeros((len(self.train_x), 1), dtype=np.float32)
        self.test_x = np.linspace(-1, 1, 100, dtype=np.float32)[:, None]
        self.test_y = np.sin(np.pi * self.test_x).astype(np.float32)

    def losses(self, targets, outputs, loss_fn, model):
        f = self.pde(model.net.inputs, outputs)[2:]
        bc = outputs[:2]
        return [loss_fn(torch.zeros_like(f), f), loss_fn(torch.zeros_like(bc), bc)]


class FNN(torch.nn.Module):
    def __init__(self, layer_sizes):
        super().__init__()
        self.linears = torch.nn.ModuleList(
            [torch.nn.Linear(a, b) for a, b in zip(layer_sizes[:-1], layer_sizes[1:])])

    def forward(self, inputs):
        x = inputs
        for linear in self.linears[:-1]:
            x = torch.tanh(linear(x))
        return self.linears[-1](x)


class Model(object):
    def __init__(self, data, net):
        self.data = data
        self.net = net
        self.step = 0

    def compile(self, lr):
        loss_fn = torch.nn.MSELoss()

        def compute_losses(targets, outputs):
            # Data losses
            losses = self.data.losses(targets, outputs, loss_fn, self)
            if not isinstance(losses, list):
                losses = [losses]
            losses = torch.stack(losses)
            return losses

        def outputs_losses(inputs, targets):
            inputs = torch.from_numpy(inputs)
            targets = torch.from_numpy(targets)
            inputs.requires_grad_()
            self.net.inputs = inputs
            outputs = self.net(inputs)
            losses = compute_losses(targets, outputs)
            return outputs, losses

        opt = torch.optim.Adam(self.net.parameters(), lr=lr)

        def train_step(inputs, targets):
            _, losses = outputs_losses(inputs, targets)
            total_loss = torch.sum(losses)
            opt.zero_grad()
            total_loss.backward()
            opt.step()

        self.outputs_losses = outputs_losses
        self.train_step = train_step

    def train(self, epochs, display_every=100):
        for i in range(epochs):
            self.train_step(self.data.train_x, self.data.train_y)
            self.step += 1
            if self.step % display_every == 0 or i + 1 == epochs:
                _, losses = self.outputs_losses(self.data.train_x, self.data.train_y)
                with torch.no_grad():
                    pred = self.net(torch.from_numpy(self.data.test_x)).numpy()
                err = np.linalg.norm(pred - self.data.test_y) / np.linalg.norm(self.data.test_y)
                print(self.step, losses.detach().numpy(), err)


torch.manual_seed(0)
data = PDE(pde, num_domain=64)
net = FNN([1, 32, 32, 1])
model = Model(data, net)
model.compile(lr=0.001)
model.train(epochs=300, display_every=100)
