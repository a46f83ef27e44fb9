# Source: https://github.com/bytedance/UNO/blob/ff2c174414ac94b03003a800e0ad653f7a036162/train.py
#   (the training loop after the fix of issue #64: a generator loops over the DataLoader)
# Adapted: the Flux model, VAE, text encoders and accelerate are replaced by a small
#   convolutional denoiser on random 3x32x32 images (a TensorDataset of 400, batch 4, images
#   and reference images as in train.py's batch dict); the loss and the step follow train.py
#   (noise, timestep mix, MSE, backward, clip_grad_norm_, step, zero_grad); 150 steps, so
#   that the generator goes through the DataLoader once and starts again.
import gc
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

    def infinite_dataloader(dataloader):
        while True:
            for batch in dataloader:
                yield batch
            gc.collect()

    dataloader = infinite_dataloader(dataloader)  # as infinite fetch data loader
    global_step = 0
    max_train_steps = 150
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
