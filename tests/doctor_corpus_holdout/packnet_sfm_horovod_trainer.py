# Source: https://github.com/TRI-ML/packnet-sfm/pull/51
#   code: packnet_sfm/trainers/horovod_trainer.py, packnet_sfm/utils/logging.py (AvgMeter),
#   packnet_sfm/utils/reduce.py and packnet_sfm/models/model_wrapper.py at commit f824ffc
# Adapted: horovod removed (plain optimizer, rank 0 only), the PackNet depth and pose networks
#   and the photometric loss replaced by a small conv depth net with an L1 reconstruction loss
#   between the target image and the context images scaled by the predicted inverse depth;
#   the KITTI loader replaced by 16 random batches of 2 frames (3x32x32); tqdm progress bar
#   replaced by enumerate and print; validation and checkpointing dropped; cuda -> cpu;
#   2 epochs.
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


class AvgMeter:
    """Average meter for logging"""
    def __init__(self, n_max=100):
        self.n_max = n_max
        self.values = []

    def __call__(self, value):
        """Appends new value and returns average"""
        self.values.append(value)
        if len(self.values) > self.n_max:
            self.values.pop(0)
        return self.get()

    def get(self):
        """Get current average"""
        return sum(self.values) / len(self.values)


def average_key(batch_list, key):
    values = [batch[key] for batch in batch_list]
    return sum(values) / len(values)


def average_sub_key(batch_list, key, sub_key):
    values = [batch[key][sub_key] for batch in batch_list]
    return sum(values) / len(values)


def average_loss_and_metrics(batch_list, prefix):
    values = OrderedDict()
    key = 'loss'
    values['{}-{}'.format(prefix, key)] = \
        average_key(batch_list, key)
    key = 'metrics'
    for sub_key in batch_list[0][key].keys():
        values['{}-{}'.format(prefix, sub_key)] = \
            average_sub_key(batch_list, key, sub_key)
    return values


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ELU(),
                                 nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ELU())
        self.dec = nn.Sequential(nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.ELU(),
                                 nn.ConvTranspose2d(32, 1, 4, stride=2, padding=1))

    def forward(self, rgb):
        return [torch.sigmoid(self.dec(self.enc(rgb)))]


class SelfSupModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth_net = DepthNet()

    def forward(self, batch, progress=0.0):
        inv_depths = self.depth_net(batch['rgb'])
        recon = [ctx * inv_depths[0] for ctx in batch['rgb_context']]
        photometric = sum(F.l1_loss(r, batch['rgb_original']) for r in recon) / len(recon)
        smoothness = inv_depths[0].diff(dim=-1).abs().mean()
        return {'loss': photometric + 1e-3 * smoothness, 'metrics': {}, 'inv_depths': inv_depths}


class ModelWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = SelfSupModel()
        self.current_epoch = 0
        self.progress = 0.0

    def configure_optimizers(self):
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=2e-4)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=30, gamma=0.5)

    def train_dataloader(self):
        return [{'rgb': torch.rand(2, 3, 32, 32), 'rgb_original': torch.rand(2, 3, 32, 32),
                 'rgb_context': [torch.rand(2, 3, 32, 32), torch.rand(2, 3, 32, 32)]}
                for _ in range(16)]

    def training_step(self, batch, *args):
        """Processes a training batch."""
        output = self.model(batch, progress=self.progress)
        return {
            'loss': output['loss'],
            'metrics': output['metrics']
        }

    def training_epoch_end(self, output_batch):
        """Finishes a training epoch."""
        loss_and_metrics = average_loss_and_metrics(output_batch, 'avg_train')
        print({k: v.item() for k, v in loss_and_metrics.items()})
        return loss_and_metrics


class HorovodTrainer:
    def __init__(self, max_epochs=2):
        self.max_epochs = max_epochs
        self.avg_loss = AvgMeter(50)
        self.is_rank_0 = True

    def fit(self, module):

        # Prepare module for training
        module.trainer = self
        # Configure optimizer and scheduler
        module.configure_optimizers()
        optimizer = module.optimizer
        scheduler = module.scheduler

        # Get train dataloader
        train_dataloader = module.train_dataloader()

        # Epoch loop
        for epoch in range(module.current_epoch, self.max_epochs):
            # Train
            self.train(train_dataloader, module, optimizer)
            # Update current epoch
            module.current_epoch += 1
            # Take a scheduler step
            scheduler.step()

    def train(self, dataloader, module, optimizer):
        # Set module to train
        module.train()
        # Prepare progress bar
        progress_bar = enumerate(dataloader)
        # Start training loop
        outputs = []
        # For all batches
        for i, batch in progress_bar:
            # Reset optimizer
            optimizer.zero_grad()
            # Take a training step
            output = module.training_step(batch, i)
            # Backprop through loss and take an optimizer step
            output['loss'].backward()
            optimizer.step()
            # Append output to list of outputs
            outputs.append(output)
            # Update progress bar if in rank 0
            if self.is_rank_0 and i % 4 == 0:
                print('Epoch {} | Avg.Loss {:.4f}'.format(module.current_epoch,
                        self.avg_loss(output['loss'].item())))
        # Return outputs for epoch end
        return module.training_epoch_end(outputs)


if __name__ == '__main__':
    torch.manual_seed(0)
    trainer = HorovodTrainer(max_epochs=2)
    trainer.fit(ModelWrapper())
