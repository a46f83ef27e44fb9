# Source: https://github.com/eriklindernoren/PyTorch-GAN/issues/183
#   code: implementations/cyclegan/cyclegan.py (training loop) and implementations/cyclegan/utils.py
#   (ReplayBuffer, LambdaLR, weights_init_normal) of the repository
# Adapted: the training loop, ReplayBuffer and LambdaLR kept as they were (Variable dropped, it
#   is a no-op now; torch.nn.init.normal_ for the removed torch.nn.init.normal); the ResNet
#   generator shortened to one residual block at 32x32 and the PatchGAN discriminator to three
#   strided blocks; the monet2photo loader replaced by 60 unaligned pairs of random 3x32x32
#   images in batches of 1 (the default); no sample images or checkpoints; 2 epochs; cpu, seeded.
import datetime
import itertools
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn


class ReplayBuffer():
    def __init__(self, max_size=50):
        assert (max_size > 0), 'Empty buffer or trying to create a black hole. Be careful.'
        self.max_size = max_size
        self.data = []

    def push_and_pop(self, data):
        to_return = []
        for element in data.data:
            element = torch.unsqueeze(element, 0)
            if len(self.data) < self.max_size:
                self.data.append(element)
                to_return.append(element)
            else:
                if random.uniform(0,1) > 0.5:
                    i = random.randint(0, self.max_size-1)
                    to_return.append(self.data[i].clone())
                    self.data[i] = element
                else:
                    to_return.append(element)
        return torch.cat(to_return)


class LambdaLR():
    def __init__(self, n_epochs, offset, decay_start_epoch):
        assert ((n_epochs - decay_start_epoch) > 0), "Decay must start before the training session ends!"
        self.n_epochs = n_epochs
        self.offset = offset
        self.decay_start_epoch = decay_start_epoch

    def step(self, epoch):
        return 1.0 - max(0, epoch + self.offset - self.decay_start_epoch)/(self.n_epochs - self.decay_start_epoch)


def weights_init_normal(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight.data, 0.0, 0.02)


class ResidualBlock(nn.Module):
    def __init__(self, in_features):
        super(ResidualBlock, self).__init__()
        self.block = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(in_features, in_features, 3),
                                   nn.InstanceNorm2d(in_features), nn.ReLU(inplace=True),
                                   nn.ReflectionPad2d(1), nn.Conv2d(in_features, in_features, 3),
                                   nn.InstanceNorm2d(in_features))

    def forward(self, x):
        return x + self.block(x)


class GeneratorResNet(nn.Module):
    def __init__(self, res_blocks=1):
        super(GeneratorResNet, self).__init__()
        model = [nn.ReflectionPad2d(3), nn.Conv2d(3, 16, 7), nn.InstanceNorm2d(16), nn.ReLU(inplace=True),
                 nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.InstanceNorm2d(32), nn.ReLU(inplace=True)]
        model += [ResidualBlock(32) for _ in range(res_blocks)]
        model += [nn.Upsample(scale_factor=2), nn.Conv2d(32, 16, 3, padding=1), nn.InstanceNorm2d(16),
                  nn.ReLU(inplace=True), nn.ReflectionPad2d(3), nn.Conv2d(16, 3, 7), nn.Tanh()]
        self.model = nn.Sequential(*model)

    def forward(self, x):
        return self.model(x)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        def discriminator_block(in_filters, out_filters, normalize=True):
            layers = [nn.Conv2d(in_filters, out_filters, 4, stride=2, padding=1)]
            if normalize:
                layers.append(nn.InstanceNorm2d(out_filters))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(*discriminator_block(3, 16, normalize=False),
                                   *discriminator_block(16, 32), *discriminator_block(32, 64),
                                   nn.ZeroPad2d((1, 0, 1, 0)), nn.Conv2d(64, 1, 4, padding=1))

    def forward(self, img):
        return self.model(img)


random.seed(0)
torch.manual_seed(0)
n_epochs, decay_epoch, start_epoch, batch_size, img_size = 2, 1, 0, 1, 32
lr, b1, b2 = 0.0002, 0.5, 0.999

criterion_GAN = torch.nn.MSELoss()
criterion_cycle = torch.nn.L1Loss()
criterion_identity = torch.nn.L1Loss()

patch = (1, img_size // 2**3, img_size // 2**3)

G_AB = GeneratorResNet()
G_BA = GeneratorResNet()
D_A = Discriminator()
D_B = Discriminator()
G_AB.apply(weights_init_normal)
G_BA.apply(weights_init_normal)
D_A.apply(weights_init_normal)
D_B.apply(weights_init_normal)

lambda_cyc = 10
lambda_id = 0.5 * lambda_cyc

optimizer_G = torch.optim.Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()),
                                lr=lr, betas=(b1, b2))
optimizer_D_A = torch.optim.Adam(D_A.parameters(), lr=lr, betas=(b1, b2))
optimizer_D_B = torch.optim.Adam(D_B.parameters(), lr=lr, betas=(b1, b2))

lr_scheduler_G = torch.optim.lr_scheduler.LambdaLR(optimizer_G, lr_lambda=LambdaLR(n_epochs, start_epoch, decay_epoch).step)
lr_scheduler_D_A = torch.optim.lr_scheduler.LambdaLR(optimizer_D_A, lr_lambda=LambdaLR(n_epochs, start_epoch, decay_epoch).step)
lr_scheduler_D_B = torch.optim.lr_scheduler.LambdaLR(optimizer_D_B, lr_lambda=LambdaLR(n_epochs, start_epoch, decay_epoch).step)

Tensor = torch.Tensor

fake_A_buffer = ReplayBuffer()
fake_B_buffer = ReplayBuffer()

dataloader = [{'A': torch.rand(batch_size, 3, img_size, img_size) * 2 - 1,
               'B': torch.rand(batch_size, 3, img_size, img_size) * 2 - 1} for _ in range(60)]

prev_time = time.time()
for epoch in range(start_epoch, n_epochs):
    for i, batch in enumerate(dataloader):

        real_A = batch['A'].type(Tensor)
        real_B = batch['B'].type(Tensor)

        valid = Tensor(np.ones((real_A.size(0), *patch)))
        fake = Tensor(np.zeros((real_A.size(0), *patch)))

        optimizer_G.zero_grad()

        loss_id_A = criterion_identity(G_BA(real_A), real_A)
        loss_id_B = criterion_identity(G_AB(real_B), real_B)

        loss_identity = (loss_id_A + loss_id_B) / 2

        fake_B = G_AB(real_A)
        loss_GAN_AB = criterion_GAN(D_B(fake_B), valid)
        fake_A = G_BA(real_B)
        loss_GAN_BA = criterion_GAN(D_A(fake_A), valid)

        loss_GAN = (loss_GAN_AB + loss_GAN_BA) / 2

        recov_A = G_BA(fake_B)
        loss_cycle_A = criterion_cycle(recov_A, real_A)
        recov_B = G_AB(fake_A)
        loss_cycle_B = criterion_cycle(recov_B, real_B)

        loss_cycle = (loss_cycle_A + loss_cycle_B) / 2

        loss_G =    loss_GAN + \
                    lambda_cyc * loss_cycle + \
                    lambda_id * loss_identity

        loss_G.backward()
        optimizer_G.step()

        optimizer_D_A.zero_grad()

        loss_real = criterion_GAN(D_A(real_A), valid)
        fake_A_ = fake_A_buffer.push_and_pop(fake_A)
        loss_fake = criterion_GAN(D_A(fake_A_.detach()), fake)
        loss_D_A = (loss_real + loss_fake) / 2

        loss_D_A.backward()
        optimizer_D_A.step()

        optimizer_D_B.zero_grad()

        loss_real = criterion_GAN(D_B(real_B), valid)
        fake_B_ = fake_B_buffer.push_and_pop(fake_B)
        loss_fake = criterion_GAN(D_B(fake_B_.detach()), fake)
        loss_D_B = (loss_real + loss_fake) / 2

        loss_D_B.backward()
        optimizer_D_B.step()

        loss_D = (loss_D_A + loss_D_B) / 2

        batches_done = epoch * len(dataloader) + i
        batches_left = n_epochs * len(dataloader) - batches_done
        time_left = datetime.timedelta(seconds=batches_left * (time.time() - prev_time))
        prev_time = time.time()

        sys.stdout.write("\r[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f, adv: %f, cycle: %f, identity: %f] ETA: %s" %
                                                        (epoch, n_epochs,
                                                        i, len(dataloader),
                                                        loss_D.item(), loss_G.item(),
                                                        loss_GAN.item(), loss_cycle.item(),
                                                        loss_identity.item(), time_left))

    lr_scheduler_G.step()
    lr_scheduler_D_A.step()
    lr_scheduler_D_B.step()
print()
