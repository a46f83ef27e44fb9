# Source: https://github.com/Azure/MS-AMP/blob/16fc9436d3d088e1005da26b0c5d982ea4a3b895/examples/mnist.py
# Adapted excerpt, before the fix https://github.com/Azure/MS-AMP/commit/61b601a4cb4b94d96fa63bc44bf2b90606760ed7
# (trimmed to the code the fix touches; omitted lines are marked).
from __future__ import print_function
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torchvision import datasets, transforms
# ... (lines 13-52 omitted)
def train(args, model, device, train_loader, optimizer, epoch):
    """Train the model with given data loader and optimizer."""  # (Args: lines 55-63 omitted)
    scaler = torch.cuda.amp.GradScaler()
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        with torch.cuda.amp.autocast():
            output = model(data)
        loss = F.nll_loss(output, target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        if batch_idx % args.log_interval == 0:
            print(
                'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                    epoch, batch_idx * len(data), len(train_loader.dataset), 100. * batch_idx / len(train_loader),
                    loss.item()
                )
            )
            if args.dry_run:
                break
