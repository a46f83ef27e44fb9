# Source: https://github.com/snakers4/silero-vad/pull/699
#   code: tuning/utils.py (train(), VADDecoderRNNJIT, AverageMeter, SileroVadPadder) as it
#   was before the pull request
# Adapted: train() kept as it was before the fix (tqdm dropped); the silero jit model's
#   stft and encoder layers replaced by stubs with the same call interface (a strided
#   1-d convolution for the stft and a convolution + pooling to 128 features for the
#   encoder), frozen as the tuning script loads them; the feather dataframe and audio files
#   replaced by 6 batches of 4 random 16384-sample waves (32 frames of 512) with random frame labels and masks
#   collated by SileroVadPadder; the config by a namespace with tune_8k=False; Adam on the
#   decoder as tune.py builds it, BCELoss(reduction='none'); 3 epochs; cpu, seeded.
import gc
import types

import torch
import torch.nn as nn


def SileroVadPadder(batch):
    wavs = [batch[i][0] for i in range(len(batch))]
    labels = [batch[i][1] for i in range(len(batch))]
    masks = [batch[i][2] for i in range(len(batch))]

    wavs = torch.nn.utils.rnn.pad_sequence(
        wavs, batch_first=True, padding_value=0)

    labels = torch.nn.utils.rnn.pad_sequence(
        labels, batch_first=True, padding_value=0)

    masks = torch.nn.utils.rnn.pad_sequence(
        masks, batch_first=True, padding_value=0)

    return wavs, labels, masks


class VADDecoderRNNJIT(nn.Module):

    def __init__(self):
        super(VADDecoderRNNJIT, self).__init__()

        self.rnn = nn.LSTMCell(128, 128)
        self.decoder = nn.Sequential(nn.Dropout(0.1),
                                     nn.ReLU(),
                                     nn.Conv1d(128, 1, kernel_size=1),
                                     nn.Sigmoid())

    def forward(self, x, state=torch.zeros(0)):
        x = x.squeeze(-1)
        if len(state):
            h, c = self.rnn(x, (state[0], state[1]))
        else:
            h, c = self.rnn(x)

        x = h.unsqueeze(-1).float()
        state = torch.stack([h, c])
        x = self.decoder(x)
        return x, state


class AverageMeter(object):

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def train(config,
          loader,
          jit_model,
          decoder,
          criterion,
          optimizer,
          device):

    losses = AverageMeter()
    decoder.train()

    context_size = 32 if config.tune_8k else 64
    num_samples = 256 if config.tune_8k else 512
    stft_layer = jit_model._model_8k.stft if config.tune_8k else jit_model._model.stft
    encoder_layer = jit_model._model_8k.encoder if config.tune_8k else jit_model._model.encoder

    with torch.enable_grad():
        for _, (x, targets, masks) in enumerate(loader):
            targets = targets.to(device)
            x = x.to(device)
            masks = masks.to(device)
            x = torch.nn.functional.pad(x, (context_size, 0))

            outs = []
            state = torch.zeros(0)
            for i in range(context_size, x.shape[1], num_samples):
                input_ = x[:, i-context_size:i+num_samples]
                out = stft_layer(input_)
                out = encoder_layer(out)
                out, state = decoder(out, state)
                outs.append(out)
            stacked = torch.cat(outs, dim=2).squeeze(1)

            loss = criterion(stacked, targets)
            loss = (loss * masks).mean()
            loss.backward()
            optimizer.step()
            losses.update(loss.item(), masks.numel())

    torch.cuda.empty_cache()
    gc.collect()

    return losses.avg


class STFT(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 129, kernel_size=256, stride=128)

    def forward(self, x):
        return self.conv(x.unsqueeze(1)).abs()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(129, 128, kernel_size=3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean(dim=2, keepdim=True)


torch.manual_seed(0)
jit_model = types.SimpleNamespace(_model=types.SimpleNamespace(stft=STFT(), encoder=Encoder()))
for p in list(jit_model._model.stft.parameters()) + list(jit_model._model.encoder.parameters()):
    p.requires_grad_(False)
config = types.SimpleNamespace(tune_8k=False, learning_rate=5e-4, num_epochs=3)
device = torch.device('cpu')

loader = []
for _ in range(6):
    batch = []
    for _ in range(4):
        wav = torch.randn(16384)
        gt = (torch.rand(16384 // 512) > 0.5).float()
        mask = torch.ones(16384 // 512)
        batch.append((wav, gt, mask))
    loader.append(SileroVadPadder(batch))

decoder = VADDecoderRNNJIT()
optimizer = torch.optim.Adam(decoder.parameters(), lr=config.learning_rate)
criterion = nn.BCELoss(reduction='none')
for epoch in range(config.num_epochs):
    train_loss = train(config, loader, jit_model, decoder, criterion, optimizer, device)
    print(epoch, train_loss)
