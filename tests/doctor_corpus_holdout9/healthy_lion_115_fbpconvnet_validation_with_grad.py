# Source: https://github.com/CambridgeCIA/LION/issues/115
#   code: scripts/example_scripts/FBPConvNet_train.py at 6b8144a (the script the issue reports):
#   the validation loop runs the model without torch.no_grad() (the issue: 11 GB going to 18 GB
#   during validation) and sums loss.item() into valid_loss
# Adapted: FBPConvNet and the clinical CT experiment replaced by a stand-in with the same call
#   (a fixed filtered-backprojection matrix from a 48x32 sinogram to a 32x32 image followed by a
#   small residual convolutional network) and random sinogram/target pairs (20 training and 8
#   validation batches of 4); 3 epochs; LIONParameter replaced by a namespace; checkpoint
#   loading/saving, tqdm and the CUDA device dropped; cpu, seeded.
from types import SimpleNamespace

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


class FBPConvNet(torch.nn.Module):
    def __init__(self, n_angles=48, n_det=32, size=32):
        super().__init__()
        self.size = size
        self.register_buffer("fbp", torch.randn(n_angles * n_det, size * size) / (n_angles * n_det) ** 0.5)
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3, padding=1),
            torch.nn.ReLU(), torch.nn.Conv2d(32, 1, 3, padding=1))

    def forward(self, sinogram):
        image = (sinogram.flatten(1) @ self.fbp).view(-1, 1, self.size, self.size)
        return image + self.net(image)


torch.manual_seed(0)
lidc_dataset = TensorDataset(torch.randn(80, 1, 48, 32), torch.randn(80, 1, 32, 32))
lidc_dataset_val = TensorDataset(torch.randn(32, 1, 48, 32), torch.randn(32, 1, 32, 32))
batch_size = 4
lidc_dataloader = DataLoader(lidc_dataset, batch_size, shuffle=True)
lidc_validation = DataLoader(lidc_dataset_val, batch_size, shuffle=True)
model = FBPConvNet()
train_param = SimpleNamespace()
loss_fcn = torch.nn.MSELoss()
train_param.optimiser = "adam"
train_param.epochs = 3
train_param.learning_rate = 1e-3
train_param.betas = (0.9, 0.99)
train_param.loss = "MSELoss"
optimiser = torch.optim.Adam(model.parameters(), lr=train_param.learning_rate, betas=train_param.betas)
steps = len(lidc_dataloader)
model.train()
min_valid_loss = np.inf
total_loss = np.zeros(train_param.epochs)
start_epoch = 0

for epoch in range(start_epoch, train_param.epochs):
    train_loss = 0.0
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    for sinogram, target_reconstruction in lidc_dataloader:
        optimiser.zero_grad()
        reconstruction = model(sinogram)
        loss = loss_fcn(reconstruction, target_reconstruction)
        loss.backward()
        train_loss += loss.item()
        optimiser.step()
        scheduler.step()
    total_loss[epoch] = train_loss
    # Validation
    valid_loss = 0.0
    model.eval()
    for sinogram, target_reconstruction in lidc_validation:
        reconstruction = model(sinogram)
        loss = loss_fcn(target_reconstruction, reconstruction)
        valid_loss += loss.item()
    print(
        f"Epoch {epoch+1} \t\t Training Loss: {train_loss / len(lidc_dataloader)} \t\t Validation Loss: {valid_loss / len(lidc_validation)}"
    )
    if min_valid_loss > valid_loss:
        print(f"Validation Loss Decreased({min_valid_loss:.6f}--->{valid_loss:.6f}) \t Saving The Model")
        min_valid_loss = valid_loss
