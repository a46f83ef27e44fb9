# Source: https://github.com/Hsintien-Ng/idinvert_pytorch-reproduced/issues/1
#   code: training/training_loop_encoder.py (div_loss_, GAN_loss, training_loop) and the
#   arguments of train_encoder.py at cf33025^, before the fix commit cf33025 (optimizer_D.zero_grad)
# Adapted: div_loss_, GAN_loss and the training loop kept as they are, minus the validation
#   image snapshot and the tensorboard writer (logger and writer None); the StyleGAN generator,
#   encoder, discriminator and the VGG perceptual model replaced by small convolutional
#   networks with the same .net interface (the generator's synthesis takes codes of
#   num_layers x w_space_dim), CelebaHQ by lists of 12 batches of 4 random 3x32x32 images,
#   max_epoch 2, the learning rates and loss weights of train_encoder.py; .cuda() dropped,
#   cpu, seeded.
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.autograd as autograd


class EasyDict(dict):
    def __getattr__(self, name):
        return self[name]


class Synthesis(nn.Module):
    def __init__(self, num_layers=4, w_dim=32):
        super().__init__()
        self.fc = nn.Linear(num_layers * w_dim, 32 * 8 * 8)
        self.up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(32, 16, 3, padding=1), nn.LeakyReLU(0.2),
                                nn.Upsample(scale_factor=2), nn.Conv2d(16, 3, 3, padding=1), nn.Tanh())

    def forward(self, z):
        return self.up(self.fc(z.flatten(1)).view(-1, 32, 8, 8))


def conv_net(out_dim):
    return nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 32, 3, 2, 1), nn.LeakyReLU(0.2),
                         nn.Flatten(), nn.Linear(32 * 8 * 8, out_dim))


class StyleGANGenerator:
    def __init__(self, num_layers=4, w_space_dim=32):
        self.num_layers, self.w_space_dim = num_layers, w_space_dim
        self.min_val, self.max_val = -1.0, 1.0
        self.net = SimpleNamespace(synthesis=Synthesis(num_layers, w_space_dim))
        for p in self.net.synthesis.parameters():
            p.requires_grad_(False)


class Wrapper:
    def __init__(self, net):
        self.net = net


def div_loss_(D, real_x, fake_x, p=2, cuda=False):
    x_ = real_x.requires_grad_(True)
    y_ = D.net(x_)
    grad = autograd.grad(
        outputs=y_,
        inputs=x_,
        grad_outputs=torch.ones_like(y_),
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]
    div = (grad * grad).sum(dim=1, keepdim=True).sum(dim=2, keepdim=True).sum(dim=3, keepdim=True)
    div = torch.mean(div)
    return div

def GAN_loss(scores_out, real=True):
    if real:
        return torch.mean(F.softplus(-scores_out))
    else:
        return torch.mean(F.softplus(scores_out))

def training_loop(
        config,
        E_lr_args            = EasyDict(),
        D_lr_args            = EasyDict(),
        opt_args             = EasyDict(),
        E_loss_args          = EasyDict(),
        D_loss_args          = EasyDict(),
        logger               = None,
        writer               = None,
        max_epoch            = 50
):
    loss_pix_weight = E_loss_args.loss_pix_weight
    loss_feat_weight = E_loss_args.loss_feat_weight
    loss_adv_weight = E_loss_args.loss_adv_weight
    loss_real_weight = D_loss_args.loss_real_weight
    loss_fake_weight = D_loss_args.loss_fake_weight
    loss_gp_weight = D_loss_args.loss_gp_weight
    loss_ep_weight = D_loss_args.loss_ep_weight
    E_learning_rate = E_lr_args.learning_rate
    D_learning_rate = D_lr_args.learning_rate

    train_dataloader = [torch.rand(4, 3, 32, 32) * 2 - 1 for _ in range(12)]

    G = StyleGANGenerator()
    E = Wrapper(conv_net(G.num_layers * G.w_space_dim))
    F = Wrapper(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()))
    D = Wrapper(conv_net(1))
    G.net.synthesis.eval()
    E.net.train()
    F.net.eval()
    D.net.train()
    encode_dim = [G.num_layers, G.w_space_dim]

    optimizer_E = torch.optim.Adam(E.net.parameters(), lr=E_learning_rate, **opt_args)
    optimizer_D = torch.optim.Adam(D.net.parameters(), lr=D_learning_rate, **opt_args)

    global_step = 0
    for epoch in range(max_epoch):
        E_loss_rec = 0.
        E_loss_adv = 0.
        E_loss_feat = 0.
        D_loss_real = 0.
        D_loss_fake = 0.
        D_loss_grad = 0.
        for step, items in enumerate(train_dataloader):
            E.net.train()
            x = items
            x = x.float()
            batch_size = x.shape[0]
            z = E.net(x).view(batch_size, *encode_dim)
            x_rec = G.net.synthesis(z)

            x_real = D.net(x)
            x_fake = D.net(x_rec.detach())
            loss_real = GAN_loss(x_real, real=True)
            loss_fake = GAN_loss(x_fake, real=False)
            # gradient div
            loss_gp = div_loss_(D, x, x_rec.detach(), cuda=config.cuda)

            D_loss_real += loss_real.item()
            D_loss_fake += loss_fake.item()
            D_loss_grad += loss_gp.item()
            log_message = f'D-[real:{loss_real.cpu().detach().numpy():.3f}, ' \
                          f'fake:{loss_fake.cpu().detach().numpy():.3f}, ' \
                          f'gp:{loss_gp.cpu().detach().numpy():.3f}]'
            D_loss = loss_real_weight * loss_real + loss_fake_weight * loss_fake + loss_gp_weight * loss_gp + loss_ep_weight * (loss_real * loss_real)
            D_loss.backward()
            optimizer_D.step()

            # Reconstruction loss.
            loss_pix = torch.mean((x - x_rec) ** 2)
            E_loss_rec += loss_pix.item()
            log_message += f', G-[pix:{loss_pix.cpu().detach().numpy():.3f}'

            # Perceptual loss.
            loss_feat = 0.
            if loss_feat_weight:
                x_feat = F.net(x)
                x_rec_feat = F.net(x_rec)
                loss_feat = torch.mean((x_feat - x_rec_feat) ** 2)
                E_loss_feat += loss_feat.item()
                log_message += f', feat:{loss_feat.cpu().detach().numpy():.3f}'

            # adversarial loss.
            loss_adv = 0.
            if loss_adv_weight:
                x_adv = D.net(x_rec)
                loss_adv = GAN_loss(x_adv, real=True)
                E_loss_adv += loss_adv.item()
                log_message += f', adv:{loss_adv.cpu().detach().numpy():.3f}]'

            E_loss = loss_pix_weight * loss_pix + loss_feat_weight * loss_feat + loss_adv_weight * loss_adv
            log_message += f', loss:{E_loss.cpu().detach().numpy():.3f}'
            optimizer_E.zero_grad()
            E_loss.backward()
            optimizer_E.step()
            global_step += 1
        print(epoch, D_loss_real, D_loss_fake, D_loss_grad, E_loss_rec)


config = SimpleNamespace(cuda=False, train_batch_size=4)
opt_args = EasyDict(betas=(0.9, 0.99), eps=1e-8)
E_lr_args = EasyDict(learning_rate=0.00001, decay_step=3000, decay_rate=0.8, stair=False)
D_lr_args = EasyDict(learning_rate=0.00001, decay_step=3000, decay_rate=0.8, stair=False)
E_loss_args = EasyDict(loss_pix_weight=1.0, loss_feat_weight=0.00005, loss_adv_weight=0.1)
D_loss_args = EasyDict(loss_real_weight=1.0, loss_fake_weight=1.0, loss_gp_weight=5.0, loss_ep_weight=0.001)
torch.manual_seed(0)
training_loop(config, E_lr_args, D_lr_args, opt_args, E_loss_args, D_loss_args, max_epoch=2)
