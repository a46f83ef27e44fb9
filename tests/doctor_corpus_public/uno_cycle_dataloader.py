# Source: https://github.com/bytedance/UNO/issues/64 (`dataloader = itertools.cycle(dataloader)`
#   then `batch = next(dataloader)` in train.py's loop, as quoted in the issue)
# Adapted: the Flux model, VAE, text encoders and accelerate are replaced by a small
#   convolutional denoiser on random 3x32x32 images (a TensorDataset of 400, batch 4, images
#   and reference images as in the batch dict); the loss and the step follow train.py
#   (noise, timestep mix, MSE, backward, clip_grad_norm_, step, zero_grad); 50 steps.
import itertools
import random

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class PairedDataset(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.img = torch.rand(n, 3, 32, 32, generator=g)
        self.ref = torch.rand(n, 3, 32, 32, generator=g)

    def __len__(self):
        return len(self.img)

    def __getitem__(self, i):
        return {"img": self.img[i] * 2 - 1, "ref_imgs": self.ref[i] * 2 - 1, "txt": f"item {i}"}


def main():
    torch.manual_seed(42)
    random.seed(42)
    dit = torch.nn.Sequential(torch.nn.Conv2d(6, 16, 3, padding=1), torch.nn.SiLU(),
                              torch.nn.Conv2d(16, 3, 3, padding=1))
    optimizer = torch.optim.AdamW(dit.parameters(), lr=1e-3)
    dataset = PairedDataset(400)
    dataloader = DataLoader(dataset, batch_size=4, shuffle=True)
    dataloader = itertools.cycle(dataloader)
    global_step = 0
    max_train_steps = 50
    train_loss = 0.0
    while global_step < max_train_steps:
        batch = next(dataloader)
        x_1 = batch["img"]
        x_ref = batch["ref_imgs"]
        t = torch.rand(x_1.shape[0])
        x_0 = torch.randn_like(x_1)
        x_t = (1 - t[:, None, None, None]) * x_1 + t[:, None, None, None] * x_0
        model_pred = dit(torch.cat([x_t, x_ref], dim=1))
        loss = F.mse_loss(model_pred.float(), (x_0 - x_1).float(), reduction="mean")
        train_loss += loss.item()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(dit.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        global_step += 1
    print(f"{train_loss / global_step:.6f}")


if __name__ == "__main__":
    main()
