# Source: https://github.com/lucidrains/denoising-diffusion-pytorch/pull/75
# Adapted: Trainer.__init__ (the parts train uses), cycle, num_to_groups and Trainer.train of
#   denoising_diffusion_pytorch.py at beb2f2d (before the pull request); accelerate's
#   Accelerator, ema_pytorch's EMA, the image folder Dataset and torchvision's save_image are
#   stubbed with the same interface, GaussianDiffusion + Unet -> a small noise-predicting
#   convolutional model with 10 diffusion steps and a no_grad sampler; 16x16 random images,
#   batch 8, 120 train steps, a sample every 20 steps (num_samples 4), checkpoints not
#   written, cpu, seeded.
import contextlib
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import Adam
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class Accelerator:
    device = torch.device('cpu')
    is_main_process = True

    def __init__(self, split_batches=True, mixed_precision='no'):
        self.native_amp = False

    def prepare(self, *args):
        return args[0] if len(args) == 1 else args

    def autocast(self):
        return contextlib.nullcontext()

    def backward(self, loss):
        loss.backward()

    def wait_for_everyone(self):
        pass

    def print(self, *args):
        print(*args)


class EMA(nn.Module):
    def __init__(self, model, beta=0.995, update_every=10):
        super().__init__()
        self.ema_model = copy.deepcopy(model)
        self.online_model = [model]
        self.beta, self.update_every, self.step = beta, update_every, 0

    @torch.no_grad()
    def update(self):
        self.step += 1
        if self.step % self.update_every == 0:
            for p_ema, p in zip(self.ema_model.parameters(), self.online_model[0].parameters()):
                p_ema.lerp_(p, 1 - self.beta)


class utils:
    @staticmethod
    def save_image(tensor, fp, nrow=8):
        return tensor.clamp(0, 1).mul(255).byte()


class ImageDataset(Dataset):
    def __init__(self, folder, image_size, augment_horizontal_flip=True, convert_image_to=None):
        self.image_size = image_size

    def __len__(self):
        return 64

    def __getitem__(self, index):
        return torch.rand(3, self.image_size, self.image_size)


class GaussianDiffusion(nn.Module):
    def __init__(self, image_size=16, timesteps=10):
        super().__init__()
        self.image_size = image_size
        self.num_timesteps = timesteps
        self.register_buffer('alphas_cumprod', torch.linspace(0.99, 0.05, timesteps))
        self.net = nn.Sequential(nn.Conv2d(4, 32, 3, padding=1), nn.SiLU(), nn.Conv2d(32, 32, 3, padding=1),
                                 nn.SiLU(), nn.Conv2d(32, 3, 3, padding=1))

    def model_predictions(self, x, t):
        t_map = (t.float() / self.num_timesteps)[:, None, None, None].expand(-1, 1, *x.shape[2:])
        return self.net(torch.cat([x, t_map], 1))

    def forward(self, img):
        t = torch.randint(0, self.num_timesteps, (img.shape[0],))
        noise = torch.randn_like(img)
        a = self.alphas_cumprod[t][:, None, None, None]
        x = a.sqrt() * (img * 2 - 1) + (1 - a).sqrt() * noise
        return F.mse_loss(self.model_predictions(x, t), noise)

    @torch.no_grad()
    def sample(self, batch_size=16):
        img = torch.randn(batch_size, 3, self.image_size, self.image_size)
        for t in reversed(range(self.num_timesteps)):
            ts = torch.full((batch_size,), t)
            a = self.alphas_cumprod[t]
            pred_noise = self.model_predictions(img, ts)
            img = (img - (1 - a).sqrt() * pred_noise) / a.sqrt()
            img = img.clamp(-1, 1)
        return (img + 1) * 0.5


def cycle(dl):
    while True:
        for data in dl:
            yield data


def num_to_groups(num, divisor):
    groups = num // divisor
    remainder = num % divisor
    arr = [divisor] * groups
    if remainder > 0:
        arr.append(remainder)
    return arr


class Trainer(object):
    def __init__(self, diffusion_model, folder, *, train_batch_size=16, gradient_accumulate_every=1,
                 train_lr=1e-4, train_num_steps=100000, ema_update_every=10, ema_decay=0.995,
                 adam_betas=(0.9, 0.99), save_and_sample_every=1000, num_samples=25,
                 results_folder='./results'):
        super().__init__()
        self.accelerator = Accelerator(split_batches=True, mixed_precision='no')
        self.model = diffusion_model
        self.num_samples = num_samples
        self.save_and_sample_every = save_and_sample_every
        self.batch_size = train_batch_size
        self.gradient_accumulate_every = gradient_accumulate_every
        self.train_num_steps = train_num_steps
        self.image_size = diffusion_model.image_size

        # dataset and dataloader
        self.ds = ImageDataset(folder, self.image_size)
        dl = DataLoader(self.ds, batch_size=train_batch_size, shuffle=True, num_workers=0)
        dl = self.accelerator.prepare(dl)
        self.dl = cycle(dl)

        # optimizer
        self.opt = Adam(diffusion_model.parameters(), lr=train_lr, betas=adam_betas)

        if self.accelerator.is_main_process:
            self.ema = EMA(diffusion_model, beta=ema_decay, update_every=ema_update_every)
            self.results_folder = results_folder

        # step counter state
        self.step = 0
        self.model, self.opt = self.accelerator.prepare(self.model, self.opt)

    def save(self, milestone):
        return {'step': self.step, 'model': self.model.state_dict()}

    def train(self):
        accelerator = self.accelerator
        device = accelerator.device

        while self.step < self.train_num_steps:

            total_loss = 0.

            for _ in range(self.gradient_accumulate_every):
                data = next(self.dl).to(device)

                with self.accelerator.autocast():
                    loss = self.model(data)
                    loss = loss / self.gradient_accumulate_every
                    total_loss += loss.item()

                self.accelerator.backward(loss)

            accelerator.wait_for_everyone()

            self.opt.step()
            self.opt.zero_grad()

            accelerator.wait_for_everyone()

            if accelerator.is_main_process:
                self.ema.to(device)
                self.ema.update()

                if self.step != 0 and self.step % self.save_and_sample_every == 0:
                    self.ema.ema_model.eval()

                    with torch.no_grad():
                        milestone = self.step // self.save_and_sample_every
                        batches = num_to_groups(self.num_samples, self.batch_size)
                        all_images_list = list(map(lambda n: self.ema.ema_model.sample(batch_size=n), batches))

                    all_images = torch.cat(all_images_list, dim = 0)
                    utils.save_image(all_images, f'{self.results_folder}/sample-{milestone}.png', nrow = int(math.sqrt(self.num_samples)))
                    self.save(milestone)

            self.step += 1

        accelerator.print('training complete')


if __name__ == '__main__':
    trainer = Trainer(GaussianDiffusion(image_size=16), 'path/to/your/images', train_batch_size=8,
                      train_num_steps=120, save_and_sample_every=20, num_samples=4)
    trainer.train()
