# Source: https://github.com/nathan66666/DVMSR/issues/5
#   code: test_demo.py (select_model, forward, run) and utils/utils_image.py (uint2tensor4,
#   tensor2uint, modcrop, calculate_psnr) at commit 86663ce
# Adapted: run() and forward() kept as they are, with time.perf_counter for the CUDA events, the
#   SSIM branch and image saving dropped, logging as prints; select_model keeps its eval() and
#   requires_grad=False loop around a small residual conv network with a pixel-shuffle x4
#   upsampler in place of the DVMSR/RLFN checkpoints; the LSDIR/DIV2K image files by 12 random
#   48x48 low-resolution images and their 192x192 references, tiled inference with tile=32 and
#   tile_overlap=8;
#   cpu, seeded.
import math
import time

import numpy as np
import torch
import torch.nn as nn


def uint2tensor4(img, data_range):
    if img.ndim == 2:
        img = np.expand_dims(img, axis=2)
    return torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float().div(255./data_range).unsqueeze(0)


def tensor2uint(img, data_range):
    img = img.data.squeeze().float().clamp_(0, 1*data_range).cpu().numpy()
    if img.ndim == 3:
        img = np.transpose(img, (1, 2, 0))
    return np.uint8((img*255.0/data_range).round())


def modcrop(img_in, scale):
    img = np.copy(img_in)
    H, W, C = img.shape
    H_r, W_r = H % scale, W % scale
    return img[:H - H_r, :W - W_r, :]


def calculate_psnr(img1, img2, border=0):
    h, w = img1.shape[:2]
    img1 = img1[border:h-border, border:w-border].astype(np.float64)
    img2 = img2[border:h-border, border:w-border].astype(np.float64)
    mse = np.mean((img1 - img2)**2)
    if mse == 0:
        return float('inf')
    return 20 * math.log10(255.0 / math.sqrt(mse))


class SmallSR(nn.Module):
    def __init__(self, feature_channels=32, upscale=4):
        super().__init__()
        self.conv_1 = nn.Conv2d(3, feature_channels, 3, padding=1)
        self.body = nn.Sequential(*[nn.Sequential(nn.Conv2d(feature_channels, feature_channels, 3, padding=1),
                                                  nn.LeakyReLU(0.05)) for _ in range(4)])
        self.upsampler = nn.Sequential(nn.Conv2d(feature_channels, 3 * upscale ** 2, 3, padding=1),
                                       nn.PixelShuffle(upscale))

    def forward(self, x):
        out_feature = self.conv_1(x)
        return self.upsampler(self.body(out_feature) + out_feature)


def select_model(device):
    name, data_range = "07_DVMSR_baseline", 1.0
    model = SmallSR()
    model.eval()
    tile = 32
    for k, v in model.named_parameters():
        v.requires_grad = False
    model = model.to(device)
    return model, name, data_range, tile


def forward(img_lq, model, tile=None, tile_overlap=8, scale=4):
    if tile is None:
        output = model(img_lq)
    else:
        b, c, h, w = img_lq.size()
        tile = min(tile, h, w)
        stride = tile - tile_overlap
        sf = scale
        h_idx_list = list(range(0, h-tile, stride)) + [h-tile]
        w_idx_list = list(range(0, w-tile, stride)) + [w-tile]
        E = torch.zeros(b, c, h*sf, w*sf).type_as(img_lq)
        W = torch.zeros_like(E)
        for h_idx in h_idx_list:
            for w_idx in w_idx_list:
                in_patch = img_lq[..., h_idx:h_idx+tile, w_idx:w_idx+tile]
                out_patch = model(in_patch)
                out_patch_mask = torch.ones_like(out_patch)
                E[..., h_idx*sf:(h_idx+tile)*sf, w_idx*sf:(w_idx+tile)*sf].add_(out_patch)
                W[..., h_idx*sf:(h_idx+tile)*sf, w_idx*sf:(w_idx+tile)*sf].add_(out_patch_mask)
        output = E.div_(W)
    return output


def run(model, model_name, data_range, tile, device, data_path, mode="test"):
    sf = 4
    border = sf
    results = dict()
    results[f"{mode}_runtime"] = []
    results[f"{mode}_psnr"] = []
    for i, (img_lr, img_hr) in enumerate(data_path):
        img_lr = uint2tensor4(img_lr, data_range)
        img_lr = img_lr.to(device)
        start = time.perf_counter()
        img_sr = forward(img_lr, model, tile)
        results[f"{mode}_runtime"].append((time.perf_counter() - start) * 1000.0)
        img_sr = tensor2uint(img_sr, data_range)
        img_hr = modcrop(img_hr, sf)
        psnr = calculate_psnr(img_sr, img_hr, border=border)
        results[f"{mode}_psnr"].append(psnr)
        print("{:d} - PSNR: {:.2f} dB".format(i, psnr))
    results[f"{mode}_ave_runtime"] = sum(results[f"{mode}_runtime"]) / len(results[f"{mode}_runtime"])
    results[f"{mode}_ave_psnr"] = sum(results[f"{mode}_psnr"]) / len(results[f"{mode}_psnr"])
    return results


torch.manual_seed(0)
rng = np.random.RandomState(0)
data_path = [(rng.randint(0, 256, (48, 48, 3)).astype(np.uint8), rng.randint(0, 256, (192, 192, 3)).astype(np.uint8))
             for _ in range(12)]
device = torch.device("cpu")
model, model_name, data_range, tile = select_model(device)
results = run(model, model_name, data_range, tile, device, data_path, mode="test")
print(results["test_ave_psnr"])
