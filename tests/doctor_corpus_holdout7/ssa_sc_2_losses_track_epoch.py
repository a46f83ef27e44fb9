# Source: https://github.com/jokester-zzz/SSA-SC/issues/2
#   code: networks/train_SSA_SC.py (the training loop of train()), networks/common/metrics.py
#   (LossesTrackEpoch) and compute_loss of networks/models/SSA_SC.py at commit ed5298d
# Adapted: LossesTrackEpoch copied as it is; the training loop of train() kept (optimizer
#   step, per-batch scalars, update_train_losses, the epoch summary and restart); the SSA-SC
#   network replaced by a small 3-d convolutional network with the same compute_loss (weighted
#   cross-entropy over 20 classes; the Lovasz term dropped), SemanticKITTI by 20 random
#   8x32x32 voxel grids per epoch, the tensorboardX writer by a stub with add_scalar, the
#   logger by print, the validation pass (run under no_grad) and checkpointing dropped;
#   Adam, 2 epochs; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn


class LossesTrackEpoch:
    def __init__(self, num_iterations):
        self.num_iterations = num_iterations
        self.validation_losses = {}
        self.train_losses = {}
        self.train_iteration_counts = 0
        self.validation_iteration_counts = 0

    def set_validation_losses(self, keys):
        for key in keys:
            self.validation_losses[key] = 0
        return

    def set_train_losses(self, keys):
        for key in keys:
            self.train_losses[key] = 0
        return

    def update_train_losses(self, loss):
        for key in loss:
            self.train_losses[key] += loss[key]
        self.train_iteration_counts += 1
        return

    def update_validaiton_losses(self, loss):
        for key in loss:
            self.validation_losses[key] += loss[key]
        self.validation_iteration_counts += 1
        return

    def restart_train_losses(self):
        for key in self.train_losses.keys():
            self.train_losses[key] = 0
        self.train_iteration_counts = 0
        return

    def restart_validation_losses(self):
        for key in self.validation_losses.keys():
            self.validation_losses[key] = 0
        self.validation_iteration_counts = 0
        return


class SSA_SC(nn.Module):
    def __init__(self, class_num=20):
        super().__init__()
        self.class_frequencies = np.random.RandomState(0).randint(1000, 100000, class_num).astype(np.float64)
        self.net = nn.Sequential(nn.Conv3d(1, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv3d(16, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv3d(16, class_num, 1))

    def forward(self, data):
        x = data['3D_OCCUPANCY']
        return [{'pred_semantic_1_1': self.net(x)}]

    def compute_loss(self, scores, data):
        scores = scores[0]
        target = data['3D_LABEL']['1_1']
        device, dtype = target.device, target.dtype
        class_weights = self.get_class_weights().to(device=target.device, dtype=torch.float32)

        criterion = nn.CrossEntropyLoss(weight=class_weights, ignore_index=255, reduction='mean').to(device=device)

        loss_1_1 = criterion(scores['pred_semantic_1_1'], data['3D_LABEL']['1_1'].long())

        loss_seg = loss_1_1
        loss_total = loss_1_1
        loss = {'total': loss_total, 'semantic_1_1': loss_1_1, 'semantic_seg': loss_seg}

        return loss

    def get_class_weights(self):
        epsilon_w = 0.001
        weights = torch.from_numpy(1 / np.log(self.class_frequencies + epsilon_w))

        return weights

    def get_train_loss_keys(self):
        return ['total', 'semantic_1_1', 'semantic_seg']


class SummaryWriter:
    def add_scalar(self, tag, value, step):
        pass


torch.manual_seed(0)
model = SSA_SC()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
tbwriter = SummaryWriter()
dset = [({'3D_OCCUPANCY': torch.rand(1, 1, 8, 32, 32),
          '3D_LABEL': {'1_1': torch.randint(0, 20, (1, 8, 32, 32))}}, i) for i in range(20)]
nbr_epochs = 2
losses_track = LossesTrackEpoch(len(dset))
losses_track.set_train_losses(model.get_train_loss_keys())

for epoch in range(1, nbr_epochs + 1):
    model.train()

    for t, (data, indices) in enumerate(dset):

        scores = model(data)
        loss = model.compute_loss(scores, data)

        optimizer.zero_grad()
        loss['total'].backward()
        optimizer.step()

        for l_key in loss:
            tbwriter.add_scalar('train_loss_batch/{}'.format(l_key), loss[l_key].item(), len(dset) * (epoch - 1) + t)
        losses_track.update_train_losses(loss)

    for l_key in losses_track.train_losses:
        tbwriter.add_scalar('train_loss_epoch/{}'.format(l_key), losses_track.train_losses[l_key].item() / losses_track.train_iteration_counts, epoch - 1)

    epoch_loss = losses_track.train_losses['total'] / losses_track.train_iteration_counts
    print('=> [Epoch {} - Total Train Loss = {}]'.format(epoch, epoch_loss))

    losses_track.restart_train_losses()
