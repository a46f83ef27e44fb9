# Source: https://github.com/yastrebksv/TennisCourtDetector/issues/7
#   code: base_trainer.py and main.py at commit 582d2be (the parent of e5cd4f1, "added optimizer.zero_grad")
# Adapted: BallTrackerNet (tracknet.py) -> a small conv encoder-decoder with the same
#   out_channels; random 64x64 images and 15-channel heatmaps instead of courtDataset; no
#   tensorboardX and no validation; 2 epochs of 12 steps, DataLoader workers 0, cpu.
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def train(model, train_loader, optimizer, criterion, device, epoch, max_iters=1000):
    model.train()
    losses = []
    max_iters = min(max_iters, len(train_loader))

    for iter_id, batch in enumerate(train_loader):
        out = model(batch[0].float().to(device))
        gt_hm_hp = batch[1].float().to(device)
        loss = criterion(F.sigmoid(out), gt_hm_hp)

        loss.backward()
        optimizer.step()
        print('train, epoch = {}, iter_id = {}/{}, loss = {}'.format(epoch, iter_id, max_iters, loss.item()))
        losses.append(loss.item())
        if iter_id > max_iters:
            break

    return np.mean(losses)


class BallTrackerNet(nn.Module):
    def __init__(self, out_channels=14):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                     nn.Conv2d(32, 64, 3, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(64, 32, 3, padding=1),
                                     nn.ReLU(), nn.Conv2d(32, out_channels, 3, padding=1))

    def forward(self, x):
        return self.decoder(self.encoder(x))


if __name__ == '__main__':

    parser = argparse.ArgumentParser()
    parser.add_argument('--batch_size', type=int, default=2, help='batch size')
    parser.add_argument('--num_epochs', type=int, default=2, help='total training epochs')
    parser.add_argument('--lr', type=float, default=1e-5, help='learning rate')
    parser.add_argument('--steps_per_epoch', type=int, default=12, help='number of steps per one epoch')
    args = parser.parse_args()

    torch.manual_seed(0)
    train_dataset = torch.utils.data.TensorDataset(torch.rand(24, 3, 64, 64), torch.rand(24, 15, 64, 64))
    train_loader = torch.utils.data.DataLoader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=0,
    )

    model = BallTrackerNet(out_channels=15)
    device = 'cpu'
    model = model.to(device)

    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), args.lr, betas=(0.9, 0.999), weight_decay=0)

    for epoch in range(args.num_epochs):
        train_loss = train(model, train_loader, optimizer, criterion, device, epoch, args.steps_per_epoch)
        print(epoch, train_loss)
