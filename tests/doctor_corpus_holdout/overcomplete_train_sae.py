# Source: https://github.com/KempnerInstitute/overcomplete/issues/5
#   code: overcomplete/sae/train.py (train_sae, _log_metrics and helpers)
# Adapted: einops.rearrange replaced by reshape, DeadCodeTracker inlined in a short form,
#   a minimal ReLU SAE and an MSE criterion instead of the package's models and losses,
#   random activations in a TensorDataset instead of a data set, 2 epochs, monitoring=2.
import time
from collections import defaultdict

import torch
import torch.nn as nn

Epsilon = 1e-6


def l2(v, dims=None):
    if dims is None:
        return v.square().sum().sqrt()
    return v.square().sum(dims).sqrt()

def r2_score(x, x_hat):
    assert x.shape == x_hat.shape, "Input tensors must have the same shape"
    assert len(x.shape) == 2, "Input tensors must be 2D"

    ss_res = torch.mean((x - x_hat) ** 2)
    ss_tot = torch.mean((x - x.mean()) ** 2)

    r2 = 1 - (ss_res / (ss_tot + Epsilon))

    return torch.mean(r2)

def l0_eps(x, dims=None, threshold=1e-6):
    if dims is None:
        return torch.mean((torch.abs(x) >= threshold).float())
    return torch.mean((torch.abs(x) >= threshold).float(), dims)

def extract_input(batch):
    if isinstance(batch, (tuple, list)):
        return batch[0]
    elif isinstance(batch, dict):
        return batch.get('data')
    else:
        return batch


class DeadCodeTracker:
    def __init__(self, nb_concepts, device):
        self.alive_features = torch.zeros(nb_concepts, dtype=torch.bool, device=device)

    def update(self, z):
        self.alive_features |= (z > 0).any(dim=0)

    def get_dead_ratio(self):
        return 1.0 - self.alive_features.float().mean().item()


def _compute_reconstruction_error(x, x_hat):
    if len(x.shape) == 4 and len(x_hat.shape) == 2:
        x_flatten = x.permute(0, 2, 3, 1).reshape(-1, x.shape[1])
    elif len(x.shape) == 3 and len(x_hat.shape) == 2:
        x_flatten = x.reshape(-1, x.shape[-1])
    else:
        assert x.shape == x_hat.shape, "Input and output shapes must match."
        x_flatten = x

    r2 = r2_score(x_flatten, x_hat)

    return r2.item()


def _log_metrics(monitoring, logs, model, z, loss, optimizer):
    if monitoring == 0:
        return

    if monitoring > 0:
        logs['lr'].append(optimizer.param_groups[0]['lr'])
        logs['step_loss'].append(loss.item())

    if monitoring > 1:
        logs['z'].append(z.detach()[::10])
        logs['z_l2'].append(l2(z).item())

        logs['dictionary_sparsity'].append(l0_eps(model.get_dictionary()).mean().item())
        logs['dictionary_norms'].append(l2(model.get_dictionary(), -1).mean().item())

        for name, param in model.named_parameters():
            if param.grad is not None:
                logs[f'params_norm_{name}'].append(l2(param).item())
                logs[f'params_grad_norm_{name}'].append(l2(param.grad).item())


def train_sae(model, dataloader, criterion, optimizer, scheduler=None,
              nb_epochs=20, clip_grad=1.0, monitoring=1, device="cpu"):
    logs = defaultdict(list)

    for epoch in range(nb_epochs):
        model.train()

        start_time = time.time()
        epoch_loss = 0.0
        epoch_error = 0.0
        epoch_sparsity = 0.0
        batch_count = 0

        dead_tracker = None

        for batch in dataloader:
            batch_count += 1
            x = extract_input(batch).to(device, non_blocking=True)
            optimizer.zero_grad()

            z_pre, z, x_hat = model(x)
            loss = criterion(x, x_hat, z_pre, z, model.get_dictionary())

            # init dead code tracker with first batch
            if dead_tracker is None:
                dead_tracker = DeadCodeTracker(z.shape[1], device)
            dead_tracker.update(z)

            loss.backward()

            if clip_grad:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad)

            optimizer.step()

            if scheduler is not None:
                scheduler.step()

            if monitoring:
                epoch_loss += loss.item()
                epoch_error += _compute_reconstruction_error(x, x_hat)
                epoch_sparsity += l0_eps(z, 0).sum().item()
                _log_metrics(monitoring, logs, model, z, loss, optimizer)

        if monitoring and batch_count > 0:
            avg_loss = epoch_loss / batch_count
            avg_error = epoch_error / batch_count
            avg_sparsity = epoch_sparsity / batch_count
            dead_ratio = dead_tracker.get_dead_ratio()
            epoch_duration = time.time() - start_time

            logs['avg_loss'].append(avg_loss)
            logs['r2'].append(avg_error)
            logs['time_epoch'].append(epoch_duration)
            logs['z_sparsity'].append(avg_sparsity)
            logs['dead_features'].append(dead_ratio)

            print(f"Epoch[{epoch+1}/{nb_epochs}], Loss: {avg_loss:.4f}, "
                  f"R2: {avg_error:.4f}, L0: {avg_sparsity:.4f}, "
                  f"Dead Features: {dead_ratio*100:.1f}%, "
                  f"Time: {epoch_duration:.4f} seconds")

    return logs


class SAE(nn.Module):
    def __init__(self, input_shape, nb_concepts):
        super().__init__()
        self.encoder = nn.Linear(input_shape, nb_concepts)
        self.dictionary = nn.Parameter(torch.randn(nb_concepts, input_shape) / input_shape ** 0.5)

    def get_dictionary(self):
        return self.dictionary

    def forward(self, x):
        z_pre = self.encoder(x)
        z = torch.relu(z_pre)
        x_hat = z @ self.dictionary
        return z_pre, z, x_hat


def mse_l1(x, x_hat, pre_codes, codes, dictionary):
    return (x - x_hat).square().mean() + 1e-3 * codes.abs().mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    activations = torch.randn(4096, 128)
    dataloader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(activations),
                                             batch_size=128, shuffle=True)
    model = SAE(128, nb_concepts=1024)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    logs = train_sae(model, dataloader, mse_l1, optimizer, nb_epochs=2, monitoring=2)
    print(len(logs['z']))
