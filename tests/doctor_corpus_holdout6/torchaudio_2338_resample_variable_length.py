# Source: https://github.com/pytorch/audio/issues/2338
# Adapted: the reproduction as posted (a Dataset whose __getitem__ resamples random
#   audio of random length from 44.1 kHz to 16 kHz, iterated through a DataLoader);
#   torchaudio is not installed, so torchaudio.functional.resample and its two helpers are
#   copied in (the sinc_interp_hann path of torchaudio's implementation); lengths 1e7-2e7 ->
#   1e6-2e6 samples, 11111 items -> 300, num_workers=os.cpu_count() -> 0 (every item is then
#   resampled in this process), rich's track -> a plain loop, the commented-out fixed-length
#   variant dropped; seeded.
import math
import random

import torch
from torch.utils.data import DataLoader, Dataset

random.seed(0)
torch.manual_seed(0)


def _get_sinc_resample_kernel(orig_freq, new_freq, gcd, lowpass_filter_width=6, rolloff=0.99,
                              device="cpu", dtype=None):
    orig_freq = int(orig_freq) // gcd
    new_freq = int(new_freq) // gcd
    base_freq = min(orig_freq, new_freq)
    base_freq *= rolloff
    width = math.ceil(lowpass_filter_width * orig_freq / base_freq)
    idx_dtype = dtype if dtype is not None else torch.float64
    idx = torch.arange(-width, width + orig_freq, dtype=idx_dtype, device=device)[None, None] / orig_freq
    t = torch.arange(0, -new_freq, -1, dtype=dtype, device=device)[:, None, None] / new_freq + idx
    t *= base_freq
    t = t.clamp_(-lowpass_filter_width, lowpass_filter_width)
    window = torch.cos(t * math.pi / lowpass_filter_width / 2) ** 2
    t *= math.pi
    scale = base_freq / orig_freq
    kernels = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t)
    kernels *= window * scale
    if dtype is None:
        kernels = kernels.to(dtype=torch.float32)
    return kernels, width


def _apply_sinc_resample_kernel(waveform, orig_freq, new_freq, gcd, kernel, width):
    orig_freq = int(orig_freq) // gcd
    new_freq = int(new_freq) // gcd
    # pack batch
    shape = waveform.size()
    waveform = waveform.view(-1, shape[-1])
    num_wavs, length = waveform.shape
    waveform = torch.nn.functional.pad(waveform, (width, width + orig_freq))
    resampled = torch.nn.functional.conv1d(waveform[:, None], kernel, stride=orig_freq)
    resampled = resampled.transpose(1, 2).reshape(num_wavs, -1)
    target_length = torch.ceil(torch.as_tensor(new_freq * length / orig_freq)).long()
    resampled = resampled[..., :target_length]
    # unpack batch
    resampled = resampled.view(shape[:-1] + resampled.shape[-1:])
    return resampled


class F:
    @staticmethod
    def resample(waveform, orig_freq, new_freq, lowpass_filter_width=6, rolloff=0.99):
        if orig_freq == new_freq:
            return waveform
        gcd = math.gcd(int(orig_freq), int(new_freq))
        kernel, width = _get_sinc_resample_kernel(orig_freq, new_freq, gcd, lowpass_filter_width,
                                                  rolloff, waveform.device, waveform.dtype)
        return _apply_sinc_resample_kernel(waveform, orig_freq, new_freq, gcd, kernel, width)


class TestResampleDataset(Dataset):
    def __getitem__(self, idx):
        audio = torch.rand((random.randint(10**6, 2 * 10**6)))
        audio = F.resample(audio, 44_100, 16_000)
        return audio

    def __len__(self):
        return 300


if __name__ == "__main__":
    dataset = TestResampleDataset()
    loader = DataLoader(dataset, num_workers=0)
    for i in loader:
        pass
