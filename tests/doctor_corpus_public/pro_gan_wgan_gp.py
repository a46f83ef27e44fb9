# Source: https://github.com/akanimax/pro_gan_pytorch/pull/12
#   code: pro_gan_pytorch/Losses.py (GANLoss, WGAN_GP) and PRO_GAN.py (optimize_discriminator,
#   optimize_generator) at commit aeec6e9d84f2214bfca9e47dc69c3a3f5a87d10e
# Adapted: the progressive generator/discriminator replaced by two small conv nets with the
#   same (x, height, alpha) signature, random images instead of a data set, cpu, 30 iterations.
import torch as th
import torch.nn as nn


class GANLoss:
    """ Base class for all losses """

    def __init__(self, dis):
        self.dis = dis

    def dis_loss(self, real_samps, fake_samps, height, alpha):
        raise NotImplementedError("dis_loss method has not been implemented")

    def gen_loss(self, real_samps, fake_samps, height, alpha):
        raise NotImplementedError("gen_loss method has not been implemented")


class WGAN_GP(GANLoss):

    def __init__(self, dis, drift=0.001, use_gp=False):
        super().__init__(dis)
        self.drift = drift
        self.use_gp = use_gp

    def __gradient_penalty(self, real_samps, fake_samps,
                           height, alpha, reg_lambda=10):
        batch_size = real_samps.shape[0]

        # generate random epsilon
        epsilon = th.rand((batch_size, 1, 1, 1)).to(fake_samps.device)

        # create the merge of both real and fake samples
        merged = (epsilon * real_samps) + ((1 - epsilon) * fake_samps)
        merged.requires_grad = True

        # forward pass
        op = self.dis(merged, height, alpha)

        # perform backward pass from op to merged for obtaining the gradients
        op.backward(gradient=th.ones_like(op), create_graph=True)
        gradient = merged.grad  # this is the gradient of the op wrt. merged

        # calculate the penalty using these gradients
        gradient = gradient.view(gradient.shape[0], -1)
        penalty = reg_lambda * ((gradient.norm(p=2, dim=1) - 1) ** 2).mean()

        # return the calculated penalty:
        return penalty

    def dis_loss(self, real_samps, fake_samps, height, alpha):
        # define the (Wasserstein) loss
        fake_out = self.dis(fake_samps, height, alpha)
        real_out = self.dis(real_samps, height, alpha)

        loss = (th.mean(fake_out) - th.mean(real_out)
                + (self.drift * th.mean(real_out ** 2)))

        if self.use_gp:
            # calculate the WGAN-GP (gradient penalty)
            gp = self.__gradient_penalty(real_samps, fake_samps, height, alpha)
            loss += gp

        return loss

    def gen_loss(self, _, fake_samps, height, alpha):
        # calculate the WGAN loss for generator
        loss = -th.mean(self.dis(fake_samps, height, alpha))

        return loss


class Generator(nn.Module):
    def __init__(self, latent_size=64):
        super().__init__()
        self.fc = nn.Linear(latent_size, 16 * 8 * 8)
        self.conv = nn.Conv2d(16, 3, 3, padding=1)

    def forward(self, x, height, alpha):
        y = th.nn.functional.leaky_relu(self.fc(x), 0.2).view(-1, 16, 8, 8)
        y = th.nn.functional.interpolate(y, scale_factor=4)
        return th.tanh(self.conv(y))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16 * 16 * 16, 1)

    def forward(self, x, height, alpha):
        y = th.nn.functional.leaky_relu(self.conv1(x), 0.2)
        y = th.nn.functional.leaky_relu(self.conv2(y), 0.2)
        return self.fc(y.view(y.shape[0], -1))


class ProGAN:
    def __init__(self, latent_size=64, n_critic=1, device=th.device("cpu")):
        self.gen = Generator(latent_size).to(device)
        self.dis = Discriminator().to(device)
        self.n_critic = n_critic
        self.gen_optim = th.optim.Adam(self.gen.parameters(), lr=0.001, betas=(0.0, 0.99), eps=1e-8)
        self.dis_optim = th.optim.Adam(self.dis.parameters(), lr=0.001, betas=(0.0, 0.99), eps=1e-8)
        self.loss = WGAN_GP(self.dis, use_gp=True)

    def optimize_discriminator(self, noise, real_batch, depth, alpha):
        real_samples = real_batch

        loss_val = 0
        for _ in range(self.n_critic):
            # generate a batch of samples
            fake_samples = self.gen(noise, depth, alpha).detach()

            loss = self.loss.dis_loss(real_samples, fake_samples, depth, alpha)

            # optimize discriminator
            self.dis_optim.zero_grad()
            loss.backward()
            self.dis_optim.step()

            loss_val += loss.item()

        return loss_val / self.n_critic

    def optimize_generator(self, noise, real_batch, depth, alpha):
        real_samples = real_batch

        # generate fake samples:
        fake_samples = self.gen(noise, depth, alpha)

        loss = self.loss.gen_loss(real_samples, fake_samples, depth, alpha)

        # optimize the generator
        self.gen_optim.zero_grad()
        loss.backward()
        self.gen_optim.step()

        # return the loss value
        return loss.item()


if __name__ == "__main__":
    th.manual_seed(0)
    pro_gan = ProGAN()
    images = th.rand(30, 16, 3, 32, 32) * 2 - 1
    for i, batch in enumerate(images):
        gan_input = th.randn(batch.shape[0], 64)
        dis_loss = pro_gan.optimize_discriminator(gan_input, batch, 3, 1.0)
        gen_loss = pro_gan.optimize_generator(gan_input, batch, 3, 1.0)
        if i % 10 == 0:
            print("batch %d  dis_loss %.4f  gen_loss %.4f" % (i, dis_loss, gen_loss))
