# Source: https://github.com/pytorch/pytorch/issues/30592
# Adapted: the reporter's DNN (Linear -> LayerNorm -> LeakyReLU -> Linear, n = 512) and the
#   first lines of calc_gradient_penalty kept; the stored report stops after
#   `eps = eps.expand(data_shape)`, so the rest of the penalty (interpolation, autograd.grad
#   with create_graph=True, the norm penalty) and the critic loop around it (Adam, 60 steps of
#   64 random 3-d points) were completed in the usual WGAN-GP form; cpu, seeded.
import torch
import torch.nn as nn


class DNN(nn.Module):
    def __init__(self):
        super().__init__()

        n = 512
        self.net = nn.Sequential(
            nn.Linear(3, n, bias = False),
            nn.LayerNorm(n),
            nn.LeakyReLU(0.2, inplace = True),
            nn.Linear(n, 1)
        )

    def forward(self, x):
        return self.net(x)


def calc_gradient_penalty(D, real_data, fake_data, device = None):
    if device is None:
        device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

    data_shape = real_data.shape

    eps = torch.rand(data_shape[0], *([1] * (len(data_shape) - 1)))
    eps = eps.expand(data_shape)

    interpolates = eps * real_data + (1 - eps) * fake_data
    interpolates.requires_grad_(True)
    disc_interpolates = D(interpolates)
    gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                                    grad_outputs=torch.ones_like(disc_interpolates),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


torch.manual_seed(0)
D = DNN()
optimizer = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.9))
for step in range(60):
    real_data = torch.randn(64, 3) + 2.0
    fake_data = torch.randn(64, 3)
    gp = calc_gradient_penalty(D, real_data, fake_data)
    loss = D(fake_data).mean() - D(real_data).mean() + 10 * gp
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(step, loss.item(), gp.item())
