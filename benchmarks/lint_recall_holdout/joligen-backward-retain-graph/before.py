# Source: https://github.com/jolibrain/joliGEN/blob/479242e62e4391a8e229075e9059ac57355f9bbd/models/base_model.py
# Adapted excerpt, before the fix https://github.com/jolibrain/joliGEN/commit/9703f042b00f04d7847f8e03e0f136f7fa7debff
# (trimmed to the code the fix touches; omitted lines are marked).
import os
import copy
import torch
from collections import OrderedDict
from abc import ABC, abstractmethod
from . import gan_networks, semantic_networks
from .modules.utils import get_scheduler
from torchviz import make_dot


from util.network_group import NetworkGroup

# for FID
from data.base_dataset import get_transform
from .modules.fid.pytorch_fid.fid_score import (
    _compute_statistics_of_path,
    calculate_frechet_distance,
)
from util.util import save_image, tensor2im
import numpy as np
from util.diff_aug import DiffAugment
from . import base_networks

# for D accuracy
from util.image_pool import ImagePool
import torch.nn.functional as F

# For D loss computing
from .modules import loss
from util.discriminator import DiscriminatorInfo


class BaseModel(ABC):
    ...  # (lines 34-999 omitted)
    def optimize_parameters(self):
        """Calculate losses, gradients, and update network weights; called in every training iteration"""

        self.niter = self.niter + 1

        for group in self.networks_groups:
            for network in self.model_names:
                if network in group.networks_to_optimize:
                    self.set_requires_grad(getattr(self, "net" + network), True)
                else:
                    self.set_requires_grad(getattr(self, "net" + network), False)

            if not group.forward_functions is None:
                with torch.cuda.amp.autocast(enabled=self.with_amp):
                    for forward in group.forward_functions:
                        getattr(self, forward)()

            for backward in group.backward_functions:
                getattr(self, backward)()

            for loss in group.loss_backward:
                if self.use_cuda:
                    ll = (
                        self.scaler.scale(getattr(self, loss))
                        / self.opt.train_iter_size
                    )
                else:
                    ll = getattr(self, loss) / self.opt.train_iter_size
                ll.backward(retain_graph=True)

            loss_names = []

            for temp in group.loss_names_list:
                loss_names += getattr(self, temp)
            self.compute_step(group.optimizer, loss_names)

            if self.opt.train_G_ema:
                for network in self.model_names:
                    if network in group.networks_to_ema:
                        self.ema_step(network)

        for cur_object in self.objects_to_update:
            cur_object.update(self.niter)
    ...  # (lines 1043-1327 omitted)
