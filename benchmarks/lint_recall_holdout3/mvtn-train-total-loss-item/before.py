# Source: https://github.com/ajhamdi/MVTN/blob/bd90fbf16ce42c7dc7ae64e1da6a4ea76118d5a2/run_mvtn.py
# Adapted excerpt, before the fix https://github.com/ajhamdi/MVTN/commit/4c5da6b0944d3ec85efeca8845ed4403d7719ead
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
import torch.nn as nn
import sys
import torch.backends.cudnn as cudnn
from torch.utils.data import DataLoader
from torch.autograd import Variable


import scipy
import scipy.spatial


from tqdm import tqdm
import pickle as pkl


import torchvision.transforms as transforms
import torchvision

import argparse
import numpy as np
import time
import os


from util import *
from ops import *

from models.pointnet import *
from models.mvtn import *
from models.multi_view import *
from models.renderer import *


from torch.utils.tensorboard import SummaryWriter
from custom_dataset import ModelNet40, collate_fn, ShapeNetCore, ScanObjectNN
from rotationNet.mvt_rotnet import RotationNet, AverageMeter, my_accuracy
from viewGCN.tools.Trainer_mvt import ModelNetTrainer_mvt

from viewGCN.model.view_gcn import view_GCN, SVCNN
# ... (lines 41-163 omitted)
models_bag = {"mvnetwork": mvnetwork, "optimizer": optimizer,
              "mvtn": mvtn, "mvtn_optimizer": mvtn_optimizer, "mvrenderer": mvrenderer}


def train(data_loader, models_bag, setup):
    train_size = len(data_loader)
    total = 0.0
    correct = 0.0

    total_loss = 0.0
    n = 0

    for i, (targets, meshes, points) in enumerate(data_loader):
        c_batch_size = targets.shape[0]
        models_bag["optimizer"].zero_grad()
        if setup["is_learning_views"]:
            models_bag["mvtn_optimizer"].zero_grad()

        azim, elev, dist = models_bag["mvtn"](
            points, c_batch_size=c_batch_size)
        rendered_images, _ = models_bag["mvrenderer"](
            meshes, points,  azim=azim, elev=elev, dist=dist)
        rendered_images = regualarize_rendered_views(
            rendered_images, setup["view_reg"], setup["augment_training"], setup["crop_ratio"])
        targets = targets.cuda()
        targets = Variable(targets)
        outputs = models_bag["mvnetwork"](rendered_images)[0]
        loss = criterion(outputs, targets)
        _, predicted = torch.max(outputs.data, 1)
        total += targets.size(0)

        loss.backward()

        models_bag["optimizer"].step()
        if setup["is_learning_views"]:
            models_bag["mvtn_optimizer"].step()
            if setup["clip_grads"]:
                clip_grads_(models_bag["mvtn"].parameters(),
                            setup["mvtn_clip_grads_value"])
            if setup["log_metrics"]:
                step = get_current_step(models_bag["mvtn_optimizer"])
                writer.add_scalar('Zoom/loss', loss.item(), step)
                writer.add_scalar(
                    'Zoom/MVT_vals', list(models_bag["mvtn"].parameters())[0].data[0, 0].item(), step)
                writer.add_scalar('Zoom/MVT_grads', np.sum(np.array(
                    [np.sum(x.grad.cpu().numpy() ** 2) for x in models_bag["mvtn"].parameters()])), step)
                writer.add_scalar(
                    'Zoom/MVCNN_vals', list(models_bag["mvnetwork"].parameters())[0].data[0].item(), step)
                writer.add_scalar('Zoom/MVCNN_grads', np.sum(np.array([np.sum(
                    x.grad.cpu().numpy() ** 2) for x in models_bag["mvnetwork"].parameters()])), step)

        if (i + 1) % setup["print_freq"] == 0:
            print("\tIter [%d/%d] Loss: %.4f" %
                  (i + 1, train_size, loss.item()))
        correct += (predicted.cpu() == targets.cpu()).sum()
        total_loss += loss
        n += 1
    avg_loss = total_loss / n
    avg_train_acc = 100 * correct / total

    return avg_train_acc, avg_loss

# ... (lines 226-934 omitted)
