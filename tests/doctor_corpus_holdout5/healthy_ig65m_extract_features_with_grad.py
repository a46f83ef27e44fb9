# Source: https://github.com/moabitcoin/ig65m-pytorch/pull/25
#   code: ig65m/cli/extract.py and ig65m/transforms.py at commit c1bcb91, the parent of the
#   pull request's commit 686f105 ("Disables grads in extract tool")
# Adapted: extract.py's VideoModel and main kept as they were (tqdm dropped) and the
#   transforms it uses copied from transforms.py; the packages it imports and torchmem does
#   not install are replaced by stubs with the same interface: einops' Rearrange and Reduce
#   (the two patterns used), ig65m's r2plus1d_34_32_ig65m (a small 3D-convolution network with
#   stem and layer1-4, random weights) and VideoDataset (30 clips of 32 random 48x64 RGB
#   frames instead of a decoded video file); the arguments are the CLI's defaults (frame size
#   128 -> 32, batch size 1) and the features are saved to a temporary directory; seeded.
import sys
import tempfile
import types

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, IterableDataset

import numpy as np


# ---- stubs for packages not installed (same interfaces) ----
class Rearrange(nn.Module):
    def __init__(self, pattern):
        super().__init__()
        assert pattern == "t h w c -> c t h w"

    def forward(self, x):
        return x.permute(3, 0, 1, 2)


class Reduce(nn.Module):
    def __init__(self, pattern, reduction):
        super().__init__()
        self.dims = {"n c t h w -> n c t": (3, 4), "n c t -> n c": (2,)}[pattern]
        self.reduction = reduction

    def forward(self, x):
        return x.mean(self.dims) if self.reduction == "mean" else x.amax(self.dims)


def _block(cin, cout, stride):
    return nn.Sequential(nn.Conv3d(cin, cout, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False),
                         nn.BatchNorm3d(cout), nn.ReLU(inplace=True),
                         nn.Conv3d(cout, cout, (3, 1, 1), (stride, 1, 1), (1, 0, 0), bias=False),
                         nn.BatchNorm3d(cout), nn.ReLU(inplace=True))


class _VideoResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.layer1 = _block(3, 16, 1), _block(16, 16, 1)
        self.layer2, self.layer3, self.layer4 = _block(16, 32, 2), _block(32, 64, 2), _block(64, 128, 2)


def r2plus1d_34_32_ig65m(num_classes, pretrained=False, progress=False):
    return _VideoResNet()


class VideoDataset(IterableDataset):
    def __init__(self, path, clip, transform=None):
        super().__init__()
        self.clip = clip
        self.transform = transform
        self.frames = np.random.default_rng(0).integers(0, 256, (30 * clip, 48, 64, 3), dtype=np.uint8)

    def __len__(self):
        return len(self.frames) // self.clip

    def __iter__(self):
        for k in range(len(self)):
            yield self.transform(self.frames[k * self.clip:(k + 1) * self.clip])
# ---- end of stubs ----


class ToTensor:
    def __call__(self, x):
        return torch.from_numpy(np.array(x)).float() / 255.


class Resize:
    def __init__(self, size, mode="bilinear"):
        self.size = size
        self.mode = mode

    def __call__(self, video):
        size = self.size
        scale = None

        if isinstance(size, int):
            scale = float(size) / min(video.shape[-2:])
            size = None

        return nn.functional.interpolate(video, size=size, scale_factor=scale,
                                         mode=self.mode, align_corners=False)


class Normalize:
    def __init__(self, mean, std):
        self.mean = mean
        self.std = std

    def __call__(self, video):
        shape = (-1,) + (1,) * (video.dim() - 1)

        mean = torch.as_tensor(self.mean).reshape(shape)
        std = torch.as_tensor(self.std).reshape(shape)

        return (video - mean) / std


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class VideoModel(nn.Module):
    def __init__(self, pool_spatial="mean", pool_temporal="mean"):
        super().__init__()

        self.model = r2plus1d_34_32_ig65m(num_classes=359, pretrained=True, progress=True)

        self.pool_spatial = Reduce("n c t h w -> n c t", reduction=pool_spatial)
        self.pool_temporal = Reduce("n c t -> n c", reduction=pool_temporal)

    def forward(self, x):
        x = self.model.stem(x)
        x = self.model.layer1(x)
        x = self.model.layer2(x)
        x = self.model.layer3(x)
        x = self.model.layer4(x)

        x = self.pool_spatial(x)
        x = self.pool_temporal(x)

        return x


def main(args):
    if torch.cuda.is_available():
        print("🐎 Running on GPU(s)", file=sys.stderr)
        device = torch.device("cuda")
        torch.backends.cudnn.benchmark = True
    else:
        print("🐌 Running on CPU(s)", file=sys.stderr)
        device = torch.device("cpu")

    model = VideoModel(pool_spatial=args.pool_spatial,
                       pool_temporal=args.pool_temporal)

    model = model.to(device)
    model = nn.DataParallel(model)
    model.eval()

    transform = Compose([
        ToTensor(),
        Rearrange("t h w c -> c t h w"),
        Resize(args.frame_size),
        Normalize(mean=[0.43216, 0.394666, 0.37645], std=[0.22803, 0.22145, 0.216989]),
    ])

    # dataset = WebcamDataset(clip=32, transform=transform)

    dataset = VideoDataset(args.video, clip=32, transform=transform)
    loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=0, shuffle=False)

    features = []

    for inputs in loader:
        inputs = inputs.to(device)

        outputs = model(inputs)
        outputs = outputs.data.cpu().numpy()

        for output in outputs:
            features.append(output)

    np.save(args.features, np.array(features), allow_pickle=False)
    print("🍪 Done", file=sys.stderr)


if __name__ == "__main__":
    torch.manual_seed(0)
    main(types.SimpleNamespace(video="video.mp4", features=tempfile.mkdtemp() + "/features.npy",
                               frame_size=32, batch_size=1, pool_spatial="mean", pool_temporal="mean"))
