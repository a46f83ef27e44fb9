# Source: https://github.com/VITA-Group/DeblurGANv2/issues/15
#   code: train.py (Trainer), adversarial_trainer.py (GANFactory, SingleGAN),
#   models/losses.py (ContentLoss, GANLoss, DiscLoss, get_loss), models/models.py
#   (DeblurModel) and metric_counter.py at commit d565087 (the version the issue was filed on)
# Adapted: config.yaml inlined with d_name 'patch_gan', disc_loss 'gan' and content_loss 'l1'
#   (options of the same get_loss) instead of the double GAN with gradient penalty and the VGG
#   perceptual loss; the FPN-Inception generator and the PatchGAN discriminator reduced to small
#   conv nets with the same roles (residual generator, patch logits); MetricCounter without
#   tensorboardX and logging files (nothing is written), skimage's SSIM replaced by a global
#   SSIM, the saved checkpoints dropped; the data sets replaced by random 64x64 sharp/blurred
#   pairs (12 training and 6 validation batches of 1), 3 epochs, warmup_num 0, .cuda() -> cpu,
#   tqdm dropped, seeded.
import math
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

WINDOW_SIZE = 100

config = {
    'experiment_desc': 'fpn', 'warmup_num': 0, 'num_epochs': 3,
    'train_batches_per_epoch': 12, 'val_batches_per_epoch': 6,
    'model': {'g_name': 'resnet', 'd_name': 'patch_gan', 'content_loss': 'l1',
              'adv_lambda': 0.001, 'disc_loss': 'gan'},
    'optimizer': {'name': 'adam', 'lr': 0.0001},
    'scheduler': {'name': 'linear', 'start_epoch': 50, 'min_lr': 0.0000001},
}


def PSNR(img1, img2):
    mse = np.mean((img1 / 255. - img2 / 255.) ** 2)
    if mse == 0:
        return 100
    PIXEL_MAX = 1
    return 20 * math.log10(PIXEL_MAX / math.sqrt(mse))


def SSIM(img1, img2, C1=(0.01 * 255) ** 2, C2=(0.03 * 255) ** 2):
    img1, img2 = img1.astype(np.float64), img2.astype(np.float64)
    mu1, mu2 = img1.mean(), img2.mean()
    cov = ((img1 - mu1) * (img2 - mu2)).mean()
    return ((2 * mu1 * mu2 + C1) * (2 * cov + C2)) / ((mu1 ** 2 + mu2 ** 2 + C1) * (img1.var() + img2.var() + C2))


class MetricCounter:
    def __init__(self, exp_name):
        self.metrics = defaultdict(list)
        self.images = defaultdict(list)
        self.best_metric = 0

    def add_image(self, x: np.ndarray, tag: str):
        self.images[tag].append(x)

    def clear(self):
        self.metrics = defaultdict(list)
        self.images = defaultdict(list)

    def add_losses(self, l_G, l_content, l_D=0):
        for name, value in zip(('G_loss', 'G_loss_content', 'G_loss_adv', 'D_loss'),
                               (l_G, l_content, l_G - l_content, l_D)):
            self.metrics[name].append(value)

    def add_metrics(self, psnr, ssim):
        for name, value in zip(('PSNR', 'SSIM'),
                               (psnr, ssim)):
            self.metrics[name].append(value)

    def loss_message(self):
        metrics = ((k, np.mean(self.metrics[k][-WINDOW_SIZE:])) for k in ('G_loss', 'PSNR', 'SSIM'))
        return '; '.join(map(lambda x: f'{x[0]}={x[1]:.4f}', metrics))

    def write_to_tensorboard(self, epoch_num, validation=False):
        for tag in self.images:
            self.images[tag] = []

    def update_best_model(self):
        cur_metric = np.mean(self.metrics['PSNR'])
        if self.best_metric < cur_metric:
            self.best_metric = cur_metric
            return True
        return False


class ContentLoss():
    def initialize(self, loss):
        self.criterion = loss

    def get_loss(self, fakeIm, realIm):
        return self.criterion(fakeIm, realIm)

    def __call__(self, fakeIm, realIm):
        return self.get_loss(fakeIm, realIm)


class GANLoss(nn.Module):
    def __init__(self, use_l1=True, target_real_label=1.0, target_fake_label=0.0,
                 tensor=torch.FloatTensor):
        super(GANLoss, self).__init__()
        self.real_label = target_real_label
        self.fake_label = target_fake_label
        self.real_label_var = None
        self.fake_label_var = None
        self.Tensor = tensor
        if use_l1:
            self.loss = nn.L1Loss()
        else:
            self.loss = nn.BCEWithLogitsLoss()

    def get_target_tensor(self, input, target_is_real):
        if target_is_real:
            create_label = ((self.real_label_var is None) or
                            (self.real_label_var.numel() != input.numel()))
            if create_label:
                real_tensor = self.Tensor(input.size()).fill_(self.real_label)
                self.real_label_var = real_tensor.requires_grad_(False)
            target_tensor = self.real_label_var
        else:
            create_label = ((self.fake_label_var is None) or
                            (self.fake_label_var.numel() != input.numel()))
            if create_label:
                fake_tensor = self.Tensor(input.size()).fill_(self.fake_label)
                self.fake_label_var = fake_tensor.requires_grad_(False)
            target_tensor = self.fake_label_var
        return target_tensor

    def __call__(self, input, target_is_real):
        target_tensor = self.get_target_tensor(input, target_is_real)
        return self.loss(input, target_tensor)


class DiscLoss(nn.Module):
    def __init__(self):
        super(DiscLoss, self).__init__()
        self.criterionGAN = GANLoss(use_l1=False)

    def get_g_loss(self, net, fakeB, realB):
        pred_fake = net.forward(fakeB)
        return self.criterionGAN(pred_fake, 1)

    def get_loss(self, net, fakeB, realB):
        self.pred_fake = net.forward(fakeB.detach())
        self.loss_D_fake = self.criterionGAN(self.pred_fake, 0)
        self.pred_real = net.forward(realB)
        self.loss_D_real = self.criterionGAN(self.pred_real, 1)
        self.loss_D = (self.loss_D_fake + self.loss_D_real) * 0.5
        return self.loss_D

    def __call__(self, net, fakeB, realB):
        return self.get_loss(net, fakeB, realB)


def get_loss(model):
    content_loss = ContentLoss()
    content_loss.initialize(nn.L1Loss())
    return content_loss, DiscLoss()


class ResnetGenerator(nn.Module):
    def __init__(self, ngf=16, n_blocks=3):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(3, ngf, 7, padding=3), nn.InstanceNorm2d(ngf), nn.ReLU(True))
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Conv2d(ngf, ngf, 3, padding=1), nn.InstanceNorm2d(ngf),
                                                    nn.ReLU(True)) for _ in range(n_blocks)])
        self.tail = nn.Conv2d(ngf, 3, 7, padding=3)

    def forward(self, x):
        return torch.clamp(x + torch.tanh(self.tail(self.blocks(self.head(x)))), min=-1, max=1)

    def unfreeze(self):
        pass


class NLayerDiscriminator(nn.Module):
    def __init__(self, ndf=16, n_layers=3):
        super().__init__()
        layers, ch = [nn.Conv2d(3, ndf, 4, stride=2, padding=2), nn.LeakyReLU(0.2, True)], ndf
        for _ in range(1, n_layers):
            layers += [nn.Conv2d(ch, ch * 2, 4, stride=2, padding=2), nn.InstanceNorm2d(ch * 2), nn.LeakyReLU(0.2, True)]
            ch *= 2
        layers += [nn.Conv2d(ch, 1, 4, padding=2)]
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)


def get_nets(model_config):
    return ResnetGenerator(), NLayerDiscriminator()


class DeblurModel(nn.Module):
    def get_input(self, data):
        img = data['a']
        inputs = img
        targets = data['b']
        return inputs, targets

    def tensor2im(self, image_tensor, imtype=np.uint8):
        image_numpy = image_tensor[0].cpu().float().numpy()
        image_numpy = (np.transpose(image_numpy, (1, 2, 0)) + 1) / 2.0 * 255.0
        return image_numpy.astype(imtype)

    def get_images_and_metrics(self, inp, output, target) -> (float, float, np.ndarray):
        inp = self.tensor2im(inp)
        fake = self.tensor2im(output.data)
        real = self.tensor2im(target.data)
        psnr = PSNR(fake, real)
        ssim = SSIM(fake, real)
        vis_img = np.hstack((inp, fake, real))
        return psnr, ssim, vis_img


class SingleGAN:
    def __init__(self, net_d, criterion):
        self.net_d = net_d
        self.criterion = criterion

    def loss_d(self, pred, gt):
        return self.criterion(self.net_d, pred, gt)

    def loss_g(self, pred, gt):
        return self.criterion.get_g_loss(self.net_d, pred, gt)

    def get_params(self):
        return self.net_d.parameters()


class LinearDecay(optim.lr_scheduler._LRScheduler):
    def __init__(self, optimizer, num_epochs, start_epoch=0, min_lr=0, last_epoch=-1):
        self.num_epochs = num_epochs
        self.start_epoch = start_epoch
        self.min_lr = min_lr
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch < self.start_epoch:
            return self.base_lrs
        return [base_lr - ((base_lr - self.min_lr) / self.num_epochs) * (self.last_epoch - self.start_epoch)
                for base_lr in self.base_lrs]


class Trainer:
    def __init__(self, config, train, val):
        self.config = config
        self.train_dataset = train
        self.val_dataset = val
        self.adv_lambda = config['model']['adv_lambda']
        self.metric_counter = MetricCounter(config['experiment_desc'])
        self.warmup_epochs = config['warmup_num']

    def train(self):
        self._init_params()
        for epoch in range(0, config['num_epochs']):
            if (epoch == self.warmup_epochs) and not (self.warmup_epochs == 0):
                self.netG.unfreeze()
                self.optimizer_G = self._get_optim(self.netG.parameters())
                self.scheduler_G = self._get_scheduler(self.optimizer_G)
            self._run_epoch(epoch)
            self._validate(epoch)
            self.scheduler_G.step()
            self.scheduler_D.step()
            self.metric_counter.update_best_model()
            print(self.metric_counter.loss_message())

    def _run_epoch(self, epoch):
        self.metric_counter.clear()
        epoch_size = config.get('train_batches_per_epoch') or len(self.train_dataset)
        tq = self.train_dataset
        i = 0
        for data in tq:
            inputs, targets = self.model.get_input(data)
            outputs = self.netG(inputs)
            loss_D = self._update_d(outputs, targets)
            self.optimizer_G.zero_grad()
            loss_content = self.criterionG(outputs, targets)
            loss_adv = self.adv_trainer.loss_g(outputs, targets)
            loss_G = loss_content + self.adv_lambda * loss_adv
            loss_G.backward()
            self.optimizer_G.step()
            self.metric_counter.add_losses(loss_G.item(), loss_content.item(), loss_D)
            curr_psnr, curr_ssim, img_for_vis = self.model.get_images_and_metrics(inputs, outputs, targets)
            self.metric_counter.add_metrics(curr_psnr, curr_ssim)
            if not i:
                self.metric_counter.add_image(img_for_vis, tag='train')
            i += 1
            if i > epoch_size:
                break
        self.metric_counter.write_to_tensorboard(epoch)

    def _validate(self, epoch):
        self.metric_counter.clear()
        epoch_size = config.get('val_batches_per_epoch') or len(self.val_dataset)
        tq = self.val_dataset
        i = 0
        for data in tq:
            inputs, targets = self.model.get_input(data)
            outputs = self.netG(inputs)
            loss_content = self.criterionG(outputs, targets)
            loss_adv = self.adv_trainer.loss_g(outputs, targets)
            loss_G = loss_content + self.adv_lambda * loss_adv
            self.metric_counter.add_losses(loss_G.item(), loss_content.item())
            curr_psnr, curr_ssim, img_for_vis = self.model.get_images_and_metrics(inputs, outputs, targets)
            self.metric_counter.add_metrics(curr_psnr, curr_ssim)
            if not i:
                self.metric_counter.add_image(img_for_vis, tag='val')
            i += 1
            if i > epoch_size:
                break
        self.metric_counter.write_to_tensorboard(epoch, validation=True)

    def _update_d(self, outputs, targets):
        if self.config['model']['d_name'] == 'no_gan':
            return 0
        self.optimizer_D.zero_grad()
        loss_D = self.adv_lambda * self.adv_trainer.loss_d(outputs, targets)
        loss_D.backward(retain_graph=True)
        self.optimizer_D.step()
        return loss_D.item()

    def _get_optim(self, params):
        return optim.Adam(params, lr=self.config['optimizer']['lr'])

    def _get_scheduler(self, optimizer):
        return LinearDecay(optimizer, min_lr=self.config['scheduler']['min_lr'],
                           num_epochs=self.config['num_epochs'],
                           start_epoch=self.config['scheduler']['start_epoch'])

    def _init_params(self):
        self.criterionG, criterionD = get_loss(self.config['model'])
        self.netG, netD = get_nets(self.config['model'])
        self.adv_trainer = SingleGAN(netD, criterionD)
        self.model = DeblurModel()
        self.optimizer_G = self._get_optim(filter(lambda p: p.requires_grad, self.netG.parameters()))
        self.optimizer_D = self._get_optim(self.adv_trainer.get_params())
        self.scheduler_G = self._get_scheduler(self.optimizer_G)
        self.scheduler_D = self._get_scheduler(self.optimizer_D)


def make_pairs(n, generator):
    pairs = []
    for _ in range(n):
        sharp = torch.rand(1, 3, 64, 64, generator=generator) * 2 - 1
        pairs.append({'a': F.avg_pool2d(sharp, 5, stride=1, padding=2), 'b': sharp})
    return pairs


if __name__ == '__main__':
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    train, val = make_pairs(12, generator), make_pairs(6, generator)
    trainer = Trainer(config, train=train, val=val)
    trainer.train()
