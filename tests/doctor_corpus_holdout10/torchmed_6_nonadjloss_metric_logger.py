# Source: https://github.com/trypag/torchmed/issues/6
#   code: examples/02_brain_segmentation_NonAdjLoss_MRI/train.py (train_semi), loss.py
#   (AdjacencyEstimator), torchmed/utils/logger_plotter.py (LoggerPlotter metrics, MetricLogger)
#   and torchmed/utils/loss.py (dice_loss) at commit 87e8f8d
# Adapted: train_semi, AdjacencyEstimator, MetricLogger and dice_loss kept as they are, .cuda()
#   dropped; LoggerPlotter reduced to its metrics dict, print_metrics and clear_metrics (no log
#   files or figures); eval_metrics (medpy's dc/jaccard) -> the same two scores computed with
#   numpy; ModSegNet -> a small encoder-decoder with log-softmax output over 8 labels; the
#   MICCAI 2012 and OASIS loaders -> random 1x48x48 slices with labels (batch 4, semi batch 12);
#   the ground-truth adjacency graph -> a random 8x8 0/1 matrix, NonAdjLoss activated with
#   lambda 1; 2 epochs of 25 iterations, print_freq 10; cpu, seeded.
import math

import numpy as np
import torch
import torch.nn as nn


class MetricLogger(object):
    """Compute and store the average and current value"""
    def __init__(self, id_name, display_name, raw_format=':.2e', avg_format=':.3e',
                 report_format=':.5f'):
        self.reset()
        self.id_name = id_name
        self.display_name = display_name
        self.raw_format = raw_format
        self.avg_format = avg_format
        self.report_format = report_format

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class LoggerPlotter(object):
    def __init__(self):
        self.metrics = {}

    def add_metric(self, metric_dict):
        for m in metric_dict:
            self.metrics.update({m.id_name: m})

    def print_metrics(self, epoch, iteration, total_iteration, phase='train'):
        phase_str = '@ Train ' if phase == 'train' else '# Test_ '
        sep = ' |' if phase == 'train' else ' /'
        epoch_str = '[{0:^5}-{1:>5}/{2:<5}]'.format(epoch, iteration, total_iteration)
        metric_str = ''
        for key, metric in self.metrics.items():
            tmp_str = (sep + ' {} = ' + metric.raw_format + ' (' + metric.avg_format + ')')
            metric_str += tmp_str.format(metric.display_name, float(metric.val), float(metric.avg))
        print(phase_str + epoch_str + metric_str)

    def clear_metrics(self):
        for key, metric in self.metrics.items():
            metric.reset()


class AdjacencyEstimator(torch.nn.Module):
    def __init__(self, nb_labels):
        super(AdjacencyEstimator, self).__init__()

        # constant 2D convolution, needs constant weights and no gradient
        # apply the same convolution filter to all labels
        layer = torch.nn.Conv2d(in_channels=nb_labels, out_channels=nb_labels,
                                kernel_size=3, stride=1, padding=0,
                                bias=False, groups=nb_labels)
        layer.weight.data.fill_(0)

        canvas = torch.Tensor(3, 3).fill_(1)
        # fill 3x3 filters with ones
        for i in range(0, nb_labels):
            layer.weight.data[i, 0, :, :] = canvas

        # exlude parameters from the subgraph
        for param in layer.parameters():
            param.requires_grad = False

        self._conv_layer = layer
        # replicate padding to recover the same resolution after convolution
        self._pad_layer = torch.nn.ZeroPad2d(1)

    def forward(self, image):
        # padding of tensor of size batch x k x W x H
        p_tild = self._pad_layer(image)
        # apply constant convolution and normalize by size of kernel
        p_tild = self._conv_layer(p_tild) / 9

        # normalization factor
        norm_factor = image.size()[0] * image.size()[2] * image.size()[3]

        return torch.einsum('nihw,njhw->ij', image, p_tild) / norm_factor


def dice_loss(output, target, ignore_index=None):
    encoded_target = output.detach() * 0
    if ignore_index is not None:
        mask = target == ignore_index
        target = target.clone()
        target[mask] = 0
        encoded_target.scatter_(1, target.unsqueeze(1), 1)
        mask = mask.unsqueeze(1).expand_as(encoded_target)
        encoded_target[mask] = 0
    else:
        encoded_target.scatter_(1, target.unsqueeze(1), 1)

    numerator = 2 * (output * encoded_target).sum(0).sum(1).sum(1)
    denominator = output + encoded_target

    if ignore_index is not None:
        denominator[mask] = 0
    denominator = denominator.sum(0).sum(1).sum(1)
    loss = 1 - (numerator / denominator)

    return loss.sum() / loss.size(0)


def eval_metrics(segmentation, reference):
    dcs, jcs = [], []
    for label in np.unique(reference):
        s, r = segmentation == label, reference == label
        inter = np.logical_and(s, r).sum()
        dcs.append(2.0 * inter / max(s.sum() + r.sum(), 1))
        jcs.append(inter / max(np.logical_or(s, r).sum(), 1))
    return [sum(dcs) / len(dcs), sum(jcs) / len(jcs)]


class ModSegNet(nn.Module):
    def __init__(self, num_classes):
        super(ModSegNet, self).__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(32, num_classes, 3, padding=1))

    def forward(self, x):
        return torch.log_softmax(self.dec(self.enc(x)), dim=1)


class Args:
    print_freq = 10


args = Args()
nb_classes = 8


def train_semi(train_loader, semi_loader, model, optimizer, nll_loss,
               nonadj_config, dice_weight, epoch, logger):
    logger.clear_metrics()

    model.train()
    adjacencyLayer = AdjacencyEstimator(nb_classes).train()
    gt_graph, nb_conn_ab_max, lambda_coef, activate_nonadjloss = nonadj_config

    miccai_iter = iter(train_loader)
    for i, (_, batch_oasis) in enumerate(semi_loader):
        try:
            batch_miccai = next(miccai_iter)
        except StopIteration:
            miccai_iter = iter(train_loader)
            batch_miccai = next(miccai_iter)

        oasis_size = batch_oasis.size(0)
        _, batch_img, target = batch_miccai
        target_gpu = target
        batch_img = torch.cat([batch_img, batch_oasis], dim=0)

        # compute output
        output = model(batch_img)

        # labels non-adjacency matrix evaluated from the segmentation output
        nonadjloss = adjacencyLayer(output.exp()) * gt_graph

        # sum and normalize to [0, 1] range, weight by lambda
        nonadjloss = (nonadjloss.sum() / nb_conn_ab_max) * lambda_coef

        # segmentation loss
        output = output[:-oasis_size]
        ce = nll_loss(output, target_gpu)
        dice = dice_loss(output.exp(), target_gpu, ignore_index=-1)
        dice *= dice_weight

        loss = ce + dice

        # if NonAdjLoss is activated
        if activate_nonadjloss:
            loss += nonadjloss
        else:
            nonadjloss.detach_()

        if math.isnan(loss.item()):
            raise ValueError("Loss is NaN")

        # compute gradient and do optim step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # measure dice metric
        indices = output.data.max(dim=1)[1].cpu().numpy()
        metrics_res = eval_metrics(indices, target.numpy())
        dice_sim, iou_metric = metrics_res
        logger.metrics['ce'].update(ce.data.item(), batch_img.size(0) - oasis_size)
        logger.metrics['dice'].update(dice.data.item(), batch_img.size(0) - oasis_size)
        logger.metrics['dice_metric'].update(dice_sim, batch_img.size(0) - oasis_size)
        logger.metrics['iou_metric'].update(iou_metric, batch_img.size(0) - oasis_size)
        logger.metrics['nonadjloss'].update(nonadjloss, batch_img.size(0))

        if i % args.print_freq == 0:
            logger.print_metrics(epoch, i, len(semi_loader))


torch.manual_seed(0)
np.random.seed(0)
train_loader = [(None, torch.randn(4, 1, 48, 48), torch.randint(0, nb_classes, (4, 48, 48))) for _ in range(8)]
semi_loader = [(None, torch.randn(12, 1, 48, 48)) for _ in range(25)]
model = ModSegNet(nb_classes)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
nll_loss = nn.NLLLoss()
gt_graph = (torch.rand(nb_classes, nb_classes) > 0.5).float()
nonadj_config = (gt_graph, (gt_graph > 0).sum(), 1.0, True)
logger = LoggerPlotter()
logger.add_metric([MetricLogger('ce', 'CE'), MetricLogger('dice', 'Dice'),
                   MetricLogger('dice_metric', 'DiceM'), MetricLogger('iou_metric', 'IoU'),
                   MetricLogger('nonadjloss', 'NonAdj')])
for epoch in range(2):
    train_semi(train_loader, semi_loader, model, optimizer, nll_loss,
               nonadj_config, 1.0, epoch, logger)
