# Source: https://github.com/snakers4/silero-vad/issues/356
#   code: utils_vad.py (get_speech_timestamps: reset_states, then one model call per
#   512-sample window, speech probabilities kept as floats, segments built from them) at
#   commit 563106e; the reporter's loop runs it on long recordings without disabling grad
# Adapted: the silero_vad.jit model is a binary TorchScript file not in the repository: it is
#   replaced by a module with the same call interface (model(chunk, sampling_rate) -> speech
#   probability, reset_states()) that keeps its LSTM state and 64-sample context between
#   calls as the scripted model does (an STFT-like conv front end, a 64-unit LSTM cell, a
#   sigmoid head); random audio of 60 s at 16 kHz instead of a recording; the post-processing
#   of probabilities into segments shortened to the thresholding loop; 3 files.
import torch
import torch.nn as nn


class SileroVAD(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.stft = nn.Conv1d(1, 65, 128, stride=64, bias=False)
        self.encoder = nn.Sequential(nn.Conv1d(65, 64, 3, padding=1), nn.ReLU())
        self.rnn = nn.LSTMCell(64, hidden)
        self.decoder = nn.Linear(hidden, 1)
        self.hidden = hidden
        self.reset_states()

    def reset_states(self, batch_size=1):
        self._state = (torch.zeros(batch_size, self.hidden), torch.zeros(batch_size, self.hidden))
        self._context = torch.zeros(batch_size, 64)
        self._last_sr = 0

    def forward(self, x, sr):
        if x.dim() == 1:
            x = x.unsqueeze(0)
        x = torch.cat([self._context, x], dim=1)
        feats = self.encoder(self.stft(x.unsqueeze(1)).abs()).mean(-1)
        self._state = self.rnn(feats, self._state)
        self._context = x[:, -64:]
        self._last_sr = sr
        return torch.sigmoid(self.decoder(self._state[0]))


def get_speech_timestamps(audio, model, threshold=0.5, sampling_rate=16000, min_speech_duration_ms=250,
                          min_silence_duration_ms=100, window_size_samples=512):
    model.reset_states()
    min_speech_samples = sampling_rate * min_speech_duration_ms / 1000
    min_silence_samples = sampling_rate * min_silence_duration_ms / 1000
    audio_length_samples = len(audio)

    speech_probs = []
    for current_start_sample in range(0, audio_length_samples, window_size_samples):
        chunk = audio[current_start_sample: current_start_sample + window_size_samples]
        if len(chunk) < window_size_samples:
            chunk = torch.nn.functional.pad(chunk, (0, int(window_size_samples - len(chunk))))
        speech_prob = model(chunk, sampling_rate).item()
        speech_probs.append(speech_prob)

    triggered = False
    speeches = []
    current_speech = {}
    neg_threshold = threshold - 0.15
    temp_end = 0
    for i, speech_prob in enumerate(speech_probs):
        if (speech_prob >= threshold) and temp_end:
            temp_end = 0
        if (speech_prob >= threshold) and not triggered:
            triggered = True
            current_speech['start'] = window_size_samples * i
            continue
        if (speech_prob < neg_threshold) and triggered:
            if not temp_end:
                temp_end = window_size_samples * i
            if (window_size_samples * i) - temp_end < min_silence_samples:
                continue
            current_speech['end'] = temp_end
            if (current_speech['end'] - current_speech['start']) > min_speech_samples:
                speeches.append(current_speech)
            current_speech = {}
            temp_end = 0
            triggered = False
    return speeches


torch.manual_seed(0)
model = SileroVAD().eval()
for recording in range(3):
    wav = torch.randn(16000 * 60) * torch.rand(1)
    speech_timestamps = get_speech_timestamps(wav, model, sampling_rate=16000)
    print(recording, len(speech_timestamps))
