# Source: https://github.com/leftthomas/SRGAN/issues/98
#   code: train.py, model.py and loss.py at
#   https://github.com/leftthomas/SRGAN/blob/64c2485/train.py (the version the report points at,
#   "train.py line 117")
# Adapted: Generator and Discriminator kept with 16 channels instead of 64 (Discriminator
#   16..128 instead of 64..1024); the VGG16 perception network of GeneratorLoss replaced by a
#   small frozen conv net (torchvision is not installed); DIV2K replaced by random images (4
#   training batches of 8 crops 44x44, 12 validation images 64x64 with their 4x downscaled and
#   re-upscaled versions); display_transform (ToPILImage, Resize(400), CenterCrop(400),
#   ToTensor) done with F.interpolate; pytorch_ssim.ssim replaced by a global SSIM; tqdm,
#   argparse, the saved image grids (of 9 images instead of 15), checkpoints and CSV dropped
#   (nothing is written); the
#   generator step backpropagates through a fresh G(z) after the discriminator step (the 2020
#   order, g_loss on the fake_out computed before optimizerD.step, fails on torch >= 1.5 with an
#   in-place modification error); 2 epochs, cpu, seeded.
import math
from math import log10

import torch
import torch.nn.functional as F
import torch.optim as optim
from torch import nn

CROP_SIZE = 44
UPSCALE_FACTOR = 4
NUM_EPOCHS = 2


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.prelu = nn.PReLU()
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        residual = self.prelu(self.bn1(self.conv1(x)))
        residual = self.bn2(self.conv2(residual))
        return x + residual


class UpsampleBLock(nn.Module):
    def __init__(self, in_channels, up_scale):
        super(UpsampleBLock, self).__init__()
        self.conv = nn.Conv2d(in_channels, in_channels * up_scale ** 2, kernel_size=3, padding=1)
        self.pixel_shuffle = nn.PixelShuffle(up_scale)
        self.prelu = nn.PReLU()

    def forward(self, x):
        return self.prelu(self.pixel_shuffle(self.conv(x)))


class Generator(nn.Module):
    def __init__(self, scale_factor, ch=16):
        upsample_block_num = int(math.log(scale_factor, 2))

        super(Generator, self).__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, ch, kernel_size=9, padding=4), nn.PReLU())
        self.block2 = ResidualBlock(ch)
        self.block3 = ResidualBlock(ch)
        self.block7 = nn.Sequential(nn.Conv2d(ch, ch, kernel_size=3, padding=1), nn.BatchNorm2d(ch))
        block8 = [UpsampleBLock(ch, 2) for _ in range(upsample_block_num)]
        block8.append(nn.Conv2d(ch, 3, kernel_size=9, padding=4))
        self.block8 = nn.Sequential(*block8)

    def forward(self, x):
        block1 = self.block1(x)
        block7 = self.block7(self.block3(self.block2(block1)))
        block8 = self.block8(block1 + block7)
        return (torch.tanh(block8) + 1) / 2


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1), nn.BatchNorm2d(16), nn.LeakyReLU(0.2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.BatchNorm2d(32), nn.LeakyReLU(0.2),
            nn.Conv2d(32, 32, kernel_size=3, stride=2, padding=1), nn.BatchNorm2d(32), nn.LeakyReLU(0.2),
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(32, 128, kernel_size=1), nn.LeakyReLU(0.2),
            nn.Conv2d(128, 1, kernel_size=1)
        )

    def forward(self, x):
        batch_size = x.size(0)
        return torch.sigmoid(self.net(x).view(batch_size))


class TVLoss(nn.Module):
    def __init__(self, tv_loss_weight=1):
        super(TVLoss, self).__init__()
        self.tv_loss_weight = tv_loss_weight

    def forward(self, x):
        batch_size = x.size()[0]
        h_x = x.size()[2]
        w_x = x.size()[3]
        count_h = self.tensor_size(x[:, :, 1:, :])
        count_w = self.tensor_size(x[:, :, :, 1:])
        h_tv = torch.pow((x[:, :, 1:, :] - x[:, :, :h_x - 1, :]), 2).sum()
        w_tv = torch.pow((x[:, :, :, 1:] - x[:, :, :, :w_x - 1]), 2).sum()
        return self.tv_loss_weight * 2 * (h_tv / count_h + w_tv / count_w) / batch_size

    @staticmethod
    def tensor_size(t):
        return t.size()[1] * t.size()[2] * t.size()[3]


class GeneratorLoss(nn.Module):
    def __init__(self):
        super(GeneratorLoss, self).__init__()
        loss_network = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()).eval()
        for param in loss_network.parameters():
            param.requires_grad = False
        self.loss_network = loss_network
        self.mse_loss = nn.MSELoss()
        self.tv_loss = TVLoss()

    def forward(self, out_labels, out_images, target_images):
        adversarial_loss = torch.mean(1 - out_labels)
        perception_loss = self.mse_loss(self.loss_network(out_images), self.loss_network(target_images))
        image_loss = self.mse_loss(out_images, target_images)
        tv_loss = self.tv_loss(out_images)
        return image_loss + 0.001 * adversarial_loss + 0.006 * perception_loss + 2e-8 * tv_loss


def ssim(img1, img2, C1=0.01 ** 2, C2=0.03 ** 2):
    mu1, mu2 = img1.mean(), img2.mean()
    cov = ((img1 - mu1) * (img2 - mu2)).mean()
    return ((2 * mu1 * mu2 + C1) * (2 * cov + C2)) / ((mu1 ** 2 + mu2 ** 2 + C1) * (img1.var() + img2.var() + C2))


def display_transform():
    def transform(img):
        img = F.interpolate(img.unsqueeze(0), size=400, mode='bilinear', align_corners=False)
        return img.squeeze(0).clamp(0, 1)
    return transform


def make_loaders(generator):
    train_loader = []
    for _ in range(3):
        target = torch.rand(8, 3, CROP_SIZE, CROP_SIZE, generator=generator)
        train_loader.append((F.avg_pool2d(target, UPSCALE_FACTOR), target))
    val_loader = []
    for _ in range(9):
        hr = torch.rand(1, 3, 64, 64, generator=generator)
        lr = F.avg_pool2d(hr, UPSCALE_FACTOR)
        hr_restore = F.interpolate(lr, scale_factor=UPSCALE_FACTOR, mode='bicubic', align_corners=False)
        val_loader.append((lr, hr_restore, hr))
    return train_loader, val_loader


if __name__ == '__main__':
    torch.manual_seed(0)
    train_loader, val_loader = make_loaders(torch.Generator().manual_seed(0))

    netG = Generator(UPSCALE_FACTOR)
    print('# generator parameters:', sum(param.numel() for param in netG.parameters()))
    netD = Discriminator()
    print('# discriminator parameters:', sum(param.numel() for param in netD.parameters()))

    generator_criterion = GeneratorLoss()

    optimizerG = optim.Adam(netG.parameters())
    optimizerD = optim.Adam(netD.parameters())

    results = {'d_loss': [], 'g_loss': [], 'd_score': [], 'g_score': [], 'psnr': [], 'ssim': []}

    for epoch in range(1, NUM_EPOCHS + 1):
        train_bar = train_loader
        running_results = {'batch_sizes': 0, 'd_loss': 0, 'g_loss': 0, 'd_score': 0, 'g_score': 0}

        netG.train()
        netD.train()
        for data, target in train_bar:
            g_update_first = True
            batch_size = data.size(0)
            running_results['batch_sizes'] += batch_size

            real_img = target
            z = data
            fake_img = netG(z)

            netD.zero_grad()
            real_out = netD(real_img).mean()
            fake_out = netD(fake_img).mean()
            d_loss = 1 - real_out + fake_out
            d_loss.backward(retain_graph=True)
            optimizerD.step()

            netG.zero_grad()
            fake_img = netG(z)
            fake_out = netD(fake_img).mean()
            g_loss = generator_criterion(fake_out, fake_img, real_img)
            g_loss.backward()
            optimizerG.step()

            running_results['g_loss'] += g_loss.item() * batch_size
            running_results['d_loss'] += d_loss.item() * batch_size
            running_results['d_score'] += real_out.item() * batch_size
            running_results['g_score'] += fake_out.item() * batch_size

        print('[%d/%d] Loss_D: %.4f Loss_G: %.4f' % (
            epoch, NUM_EPOCHS, running_results['d_loss'] / running_results['batch_sizes'],
            running_results['g_loss'] / running_results['batch_sizes']))

        netG.eval()
        with torch.no_grad():
            val_bar = val_loader
            valing_results = {'mse': 0, 'ssims': 0, 'psnr': 0, 'ssim': 0, 'batch_sizes': 0}
            val_images = []
            for val_lr, val_hr_restore, val_hr in val_bar:
                batch_size = val_lr.size(0)
                valing_results['batch_sizes'] += batch_size
                lr = val_lr
                hr = val_hr
                sr = netG(lr)

                batch_mse = ((sr - hr) ** 2).data.mean()
                valing_results['mse'] += batch_mse * batch_size
                batch_ssim = ssim(sr, hr).item()
                valing_results['ssims'] += batch_ssim * batch_size
                valing_results['psnr'] = 10 * log10((hr.max()**2) / (valing_results['mse'] / valing_results['batch_sizes']))
                valing_results['ssim'] = valing_results['ssims'] / valing_results['batch_sizes']

                val_images.extend(
                    [display_transform()(val_hr_restore.squeeze(0)), display_transform()(hr.data.cpu().squeeze(0)),
                     display_transform()(sr.data.cpu().squeeze(0))])
            val_images = torch.stack(val_images)
            val_images = torch.chunk(val_images, val_images.size(0) // 9)
            print('PSNR: %.4f dB SSIM: %.4f, %d image grids' % (valing_results['psnr'], valing_results['ssim'], len(val_images)))

        results['d_loss'].append(running_results['d_loss'] / running_results['batch_sizes'])
        results['g_loss'].append(running_results['g_loss'] / running_results['batch_sizes'])
        results['psnr'].append(valing_results['psnr'])
        results['ssim'].append(valing_results['ssim'])
