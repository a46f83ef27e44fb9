# Source: https://github.com/McGregorWwww/UDTransNet/issues/21
#   code: train_one_epoch.py (print_summary, train_one_epoch), utils.py (WeightedBCE,
#   WeightedDiceLoss, BinaryDiceBCE) and the epoch loop of train_kfold.py (main_loop) at 4657587
# Adapted: train_one_epoch, the losses and the main loop kept as they were (.cuda(),
#   torch.cuda.empty_cache(), checkpointing and the visualisation branch dropped; the logger is
#   the logging module, the tensorboard writer a stand-in with add_scalar); UDTransNet replaced
#   by a small two-level U-Net with a sigmoid output (n_labels = 1), the GlaS/MoNuSeg loaders by
#   20 training and 5 validation batches of 4 random 3x64x64 images with binary masks; 2 epochs;
#   cpu, seeded.
import logging
import time
import types

import torch
import torch.nn as nn

config = types.SimpleNamespace(n_labels=1, batch_size=4, print_frequency=5, vis_frequency=5000,
                               tensorboard=True, epochs=2)
logging.basicConfig(level=logging.INFO, format="%(message)s")
logger = logging.getLogger("udtransnet")


class WeightedBCE(nn.Module):
    def __init__(self, weights=[0.5, 0.5]):
        super(WeightedBCE, self).__init__()
        self.weights = weights

    def forward(self, logit_pixel, truth_pixel):
        logit = logit_pixel.view(-1)
        truth = truth_pixel.view(-1)
        assert (logit.shape == truth.shape)
        loss = torch.nn.functional.binary_cross_entropy(logit, truth, reduction='none')
        pos = (truth > 0.5).float()
        neg = (truth < 0.5).float()
        pos_weight = pos.sum().item() + 1e-12
        neg_weight = neg.sum().item() + 1e-12
        loss = (self.weights[0] * pos * loss / pos_weight + self.weights[1] * neg * loss / neg_weight).sum()
        return loss


class WeightedDiceLoss(nn.Module):
    def __init__(self, weights=[0.5, 0.5]):
        super(WeightedDiceLoss, self).__init__()
        self.weights = weights

    def forward(self, logit, truth, smooth=1e-5):
        batch_size = len(logit)
        logit = logit.view(batch_size, -1)
        truth = truth.view(batch_size, -1)
        assert (logit.shape == truth.shape)
        p = logit.view(batch_size, -1)
        t = truth.view(batch_size, -1)
        w = truth.detach()
        w = w * (self.weights[1] - self.weights[0]) + self.weights[0]
        p = w * (p)
        t = w * (t)
        intersection = (p * t).sum(-1)
        union = (p * p).sum(-1) + (t * t).sum(-1)
        dice = 1 - (2 * intersection + smooth) / (union + smooth)
        loss = dice.mean()
        return loss


class BinaryDiceBCE(nn.Module):
    def __init__(self, dice_weight=1, BCE_weight=1):
        super(BinaryDiceBCE, self).__init__()
        self.BCE_loss = WeightedBCE(weights=[0.5, 0.5])
        self.dice_loss = WeightedDiceLoss(weights=[0.5, 0.5])
        self.BCE_weight = BCE_weight
        self.dice_weight = dice_weight

    def _show_dice(self, inputs, targets):
        inputs[inputs >= 0.5] = 1
        inputs[inputs < 0.5] = 0
        targets[targets > 0] = 1
        targets[targets <= 0] = 0
        hard_dice_coeff = 1.0 - self.dice_loss(inputs, targets)
        return hard_dice_coeff

    def forward(self, inputs, targets):
        dice = self.dice_loss(inputs, targets)
        BCE = self.BCE_loss(inputs, targets)
        dice_BCE_loss = self.dice_weight * dice + self.BCE_weight * BCE
        return dice_BCE_loss


class SmallUNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(2 * c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, 1, 1))

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        return torch.sigmoid(self.dec(torch.cat([self.up(e2), e1], dim=1)))


class Writer:
    def add_scalar(self, tag, value, step):
        pass


def print_summary(epoch, i, nb_batch, loss, fold, kfold, average_loss, average_time, dice, average_dice, mode, lr, logger):
    summary = '   [' + str(mode) + '] Fold: [{0}/{1}] Epoch: [{2}][{3}/{4}]  '.format(fold, kfold, epoch, i, nb_batch)
    string = ''
    string += 'Loss:{:.3f} '.format(loss)
    string += '(Avg {:.4f}) '.format(average_loss)
    string += 'Dice:{:.4f} '.format(dice)
    string += '(Avg {:.4f}) '.format(average_dice)
    if mode == 'Train':
        string += 'LR {:.2e}   '.format(lr)
    string += '(AvgTime {:.1f})   '.format(average_time)
    summary += string
    logger.info(summary)


def train_one_epoch(loader, model, criterion, optimizer, writer, epoch, lr_scheduler, fold, kfold, logger):
    logging_mode = 'Train' if model.training else 'Val'
    end = time.time()
    time_sum, loss_sum = 0, 0
    dice_sum, iou_sum, acc_sum = 0.0, 0.0, 0.0
    dices = []
    for i, (sampled_batch, names) in enumerate(loader, 1):
        images, masks = sampled_batch['image'], sampled_batch['label']
        preds = model(images)
        out_loss = criterion(preds, masks.float())
        if model.training:
            optimizer.zero_grad()
            out_loss.backward()
            optimizer.step()
        train_dice = criterion._show_dice(preds, masks.float())
        batch_time = time.time() - end
        dices.append(train_dice)
        time_sum += len(images) * batch_time
        loss_sum += len(images) * out_loss
        dice_sum += len(images) * train_dice
        if i == len(loader):
            average_loss = loss_sum / (config.batch_size * (i - 1) + len(images))
            average_time = time_sum / (config.batch_size * (i - 1) + len(images))
            train_dice_avg = dice_sum / (config.batch_size * (i - 1) + len(images))
        else:
            average_loss = loss_sum / (i * config.batch_size)
            average_time = time_sum / (i * config.batch_size)
            train_dice_avg = dice_sum / (i * config.batch_size)
        end = time.time()
        if i % config.print_frequency == 0:
            print_summary(epoch + 1, i, len(loader), out_loss, fold, kfold, average_loss, average_time,
                          train_dice, train_dice_avg, logging_mode,
                          lr=min(g["lr"] for g in optimizer.param_groups), logger=logger)
        if config.tensorboard:
            step = epoch * len(loader) + i
            writer.add_scalar(logging_mode + '_dice', train_dice, step)
    if lr_scheduler is not None:
        lr_scheduler.step()
    return average_loss, train_dice_avg


def make_loader(n, seed):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for k in range(n):
        image = torch.rand(4, 3, 64, 64, generator=g)
        label = (image.mean(1) > 0.5).float()
        batches.append(({'image': image, 'label': label}, ['img_%d_%d' % (k, j) for j in range(4)]))
    return batches


torch.manual_seed(0)
train_loader, val_loader = make_loader(20, 1), make_loader(5, 2)
model = SmallUNet()
criterion = BinaryDiceBCE(dice_weight=1, BCE_weight=1)
optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3)
lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=10, T_mult=1, eta_min=1e-4)
writer = Writer()
for epoch in range(config.epochs):
    model.train(True)
    train_one_epoch(train_loader, model, criterion, optimizer, writer, epoch, None, 0, 5, logger)
    with torch.no_grad():
        model.eval()
        val_loss, val_dice = train_one_epoch(val_loader, model, criterion, optimizer, writer, epoch, lr_scheduler, 0, 5, logger)
