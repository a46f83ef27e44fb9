# Source: https://github.com/k2-fsa/icefall/commit/804621100eaf0119a605a0d3d1cbd3c94a306a6f
#   code: egs/librispeech/ASR/zipformer/train.py (compute_loss, train_one_epoch) and icefall/utils.py
#         (MetricsTracker) at the parent of 80462110
# Adapted: the Zipformer with its transducer, k2 and sentencepiece is replaced by a small encoder with a
# CTC head and a masked-frame reconstruction head returning the same six losses (the transducer, CR-CTC
# and attention-decoder ones are None as with those options off); lhotse batches are random features and
# token ids; the grad scaler, scheduler, checkpointing and tensorboard are left out; 150 batches on CPU.
import collections
from typing import List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class AttributeDict(dict):
    def __getattr__(self, key):
        return self[key]


class MetricsTracker(collections.defaultdict):
    def __init__(self):
        super(MetricsTracker, self).__init__(int)

    def __add__(self, other: "MetricsTracker") -> "MetricsTracker":
        ans = MetricsTracker()
        for k, v in self.items():
            ans[k] = v
        for k, v in other.items():
            if v - v == 0:
                ans[k] = ans[k] + v
        return ans

    def __mul__(self, alpha: float) -> "MetricsTracker":
        ans = MetricsTracker()
        for k, v in self.items():
            ans[k] = v * alpha
        return ans

    def __str__(self) -> str:
        ans_frames = ""
        for k, v in self.norm_items():
            ans_frames += str(k) + "=" + "%.4g" % v + ", "
        return ans_frames + "over " + "%.2f" % self["frames"] + " frames. "

    def norm_items(self) -> List[Tuple[str, float]]:
        num_frames = self["frames"] if "frames" in self else 1
        return [(k, float(v) / num_frames) for k, v in self.items() if k != "frames"]


class AsrModel(nn.Module):
    def __init__(self, feature_dim=80, encoder_dim=256, vocab_size=500):
        super().__init__()
        self.encoder_embed = nn.Conv1d(feature_dim, encoder_dim, 3, stride=2, padding=1)
        self.encoder = nn.Sequential(nn.Linear(encoder_dim, encoder_dim), nn.ReLU(), nn.Linear(encoder_dim, encoder_dim), nn.ReLU())
        self.ctc_output = nn.Linear(encoder_dim, vocab_size)
        self.reconstruction = nn.Linear(encoder_dim, 2 * feature_dim)

    def forward(self, x, x_lens, y, y_lens):
        mask = torch.rand(x.shape[:2]) < 0.15
        h = self.encoder(self.encoder_embed(x.masked_fill(mask.unsqueeze(-1), 0.0).transpose(1, 2)).transpose(1, 2))
        h_lens = (x_lens + 1) // 2
        log_probs = self.ctc_output(h).log_softmax(-1)
        ctc_loss = F.ctc_loss(log_probs.transpose(0, 1), y, h_lens, y_lens, reduction="sum")
        recon = self.reconstruction(h).reshape(x.shape[0], -1, x.shape[2])[:, :x.shape[1]]
        reconstruction_loss = ((recon - x) ** 2)[mask].sum() / x.shape[2]
        return None, None, ctc_loss, None, None, reconstruction_loss


def compute_loss(params, model, batch, is_training):
    feature = batch["inputs"]
    feature_lens = batch["supervisions"]["num_frames"]
    batch_idx_train = params.batch_idx_train
    warm_step = params.warm_step
    with torch.set_grad_enabled(is_training):
        simple_loss, pruned_loss, ctc_loss, attention_decoder_loss, cr_loss, reconstruction_loss = model(
            feature, feature_lens, batch["supervisions"]["tokens"], batch["supervisions"]["num_tokens"])
        loss = 0.0
        if params.use_ctc:
            loss += params.ctc_loss_scale * ctc_loss
        reconstruction_loss_scale = (params.reconstruction_loss_scale *
                                     max(1.0, 2.0 - 1.0 * (batch_idx_train / warm_step)))
        loss += reconstruction_loss_scale * reconstruction_loss

    info = MetricsTracker()
    info["frames"] = (feature_lens // params.subsampling_factor).sum().item()
    info["loss"] = loss.detach().cpu().item()
    if params.use_ctc:
        info["ctc_loss"] = ctc_loss.detach().cpu().item()
    info["recon_loss"] = reconstruction_loss
    return loss, info


def train_one_epoch(params, model, optimizer, train_dl):
    model.train()
    tot_loss = MetricsTracker()
    for batch_idx, batch in enumerate(train_dl):
        params.batch_idx_train += 1
        loss, loss_info = compute_loss(params=params, model=model, batch=batch, is_training=True)
        tot_loss = (tot_loss * (1 - 1 / params.reset_interval)) + loss_info
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if batch_idx % params.log_interval == 0:
            print(f"batch {batch_idx}, loss[{loss_info}], tot_loss[{tot_loss}]")
    return tot_loss


def make_batch(batch_size=8, frames=200, feature_dim=80, vocab_size=500, tokens=30):
    return {"inputs": torch.randn(batch_size, frames, feature_dim),
            "supervisions": {"num_frames": torch.full((batch_size,), frames),
                             "tokens": torch.randint(1, vocab_size, (batch_size, tokens)),
                             "num_tokens": torch.full((batch_size,), tokens)}}


params = AttributeDict(batch_idx_train=0, warm_step=2000, use_ctc=True, ctc_loss_scale=0.2, reconstruction_loss_scale=0.1,
                       subsampling_factor=2, reset_interval=200, log_interval=50)
model = AsrModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_dl = [make_batch() for _ in range(150)]
train_one_epoch(params, model, optimizer, train_dl)
