# Source: https://github.com/descriptinc/descript-audio-codec/issues/55
# Adapted: the segment loop as posted; the DAC model is stubbed with the same
#   interface (preprocess(audio, sample_rate), encode(x) -> z, codes, latents,
#   commitment_loss, codebook_loss) around a small strided Conv1d encoder and a one-codebook
#   quantiser instead of the pretrained 44 kHz model; einops' rearrange is a local function
#   for the one pattern used; the audio file -> 30 s of random mono audio at 8 kHz cut into
#   1 s segments, cuda:5 -> cpu, the torch.cuda memory prints dropped, seeded.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def rearrange(tensor, pattern):
    assert pattern == '1 e t -> t e'
    return tensor[0].transpose(0, 1)


class AudioSignal:
    def __init__(self, audio_data, sample_rate):
        self.audio_data = audio_data
        self.sample_rate = sample_rate


class DAC(nn.Module):
    def __init__(self, latent_dim=64, codebook_size=256):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv1d(1, 32, 7, stride=2, padding=3), nn.ELU(),
            nn.Conv1d(32, 64, 7, stride=4, padding=3), nn.ELU(),
            nn.Conv1d(64, latent_dim, 7, stride=8, padding=3))
        self.codebook = nn.Embedding(codebook_size, latent_dim)
        self.hop_length = 64

    @property
    def device(self):
        return next(self.parameters()).device

    def preprocess(self, audio_data, sample_rate):
        length = audio_data.shape[-1]
        right_pad = (self.hop_length - length % self.hop_length) % self.hop_length
        return F.pad(audio_data, (0, right_pad))

    def encode(self, audio_data):
        latents = self.encoder(audio_data)
        dist = torch.cdist(latents.transpose(1, 2), self.codebook.weight[None])
        codes = dist.argmin(-1)
        z_q = self.codebook(codes).transpose(1, 2)
        commitment_loss = F.mse_loss(latents, z_q.detach())
        codebook_loss = F.mse_loss(z_q, latents.detach())
        z = latents + (z_q - latents).detach()
        return z, codes, latents, commitment_loss, codebook_loss


dac_model = DAC()
sample_rate = 8000
signal = AudioSignal(torch.randn(1, 1, 30 * sample_rate), sample_rate)
samples_per_segment = sample_rate
total_samples = signal.audio_data.shape[-1]
num_segments = total_samples // samples_per_segment
embeddings = []

signal.audio_data = signal.audio_data
for i in range(num_segments):
    start = i * samples_per_segment
    end = min(start + samples_per_segment, total_samples)
    segment = signal.audio_data[:, :, start:end].to(dac_model.device)

    # Process each segment
    x = dac_model.preprocess(segment, signal.sample_rate)

    z, codes, latents, commitment_loss, codebook_loss = dac_model.encode(x)
    embeddings.append(rearrange(z, '1 e t -> t e').cpu())

    del x, z, codes, latents, commitment_loss, codebook_loss

print(len(embeddings), embeddings[0].shape)
