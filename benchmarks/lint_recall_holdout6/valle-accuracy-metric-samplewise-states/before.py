# Source: https://github.com/lifeiteng/vall-e/blob/3da3bc27efeac2999d5f3f2459d8f3e5e0753e89/valle/models/valle.py
# Adapted excerpt, before the fix https://github.com/lifeiteng/vall-e/commit/7725efbec96cbcb31232737f8521d43e78cdc289
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-14 omitted)
import random
from typing import Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from icefall.utils import make_pad_mask
from torchmetrics.classification import MulticlassAccuracy

from valle.modules.embedding import SinePositionalEmbedding, TokenEmbedding
from valle.modules.transformer import (
    AdaptiveLayerNorm,
    TransformerDecoderLayer,
    TransformerEncoderLayer,
)

NUM_TEXT_TOKENS = 128
NUM_AUDIO_TOKENS = 1024  # EnCodec RVQ bins
NUM_MEL_BINS = 100  # BigVGAN bigvgan_24khz_100band

# ... (lines 35-46 omitted)
class VALLF(nn.Module):
    """It implements https://arxiv.org/abs/2301.02111
    "Neural Codec Language Models are Zero-Shot Text to Speech Synthesizers"
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        num_layers: int,
        norm_first: bool = True,
        add_prenet: bool = False,
        decoder_cls: Union[
            nn.TransformerDecoder, nn.TransformerEncoder
        ] = nn.TransformerDecoder,
        decoder_layer_cls: Union[
            TransformerDecoderLayer, TransformerEncoderLayer
        ] = TransformerDecoderLayer,
    ):
        # ... (lines 66-172 omitted)
        self.ar_accuracy_metric = MulticlassAccuracy(
            NUM_AUDIO_TOKENS + 1,
            top_k=10,
            average="micro",
            multidim_average="samplewise",
            ignore_index=NUM_AUDIO_TOKENS,
        )

        self.nar_accuracy_metric = MulticlassAccuracy(
            NUM_AUDIO_TOKENS + 1,
            top_k=10,
            average="micro",
            multidim_average="samplewise",
            ignore_index=NUM_AUDIO_TOKENS,
        )
    # ... (lines 188-201 omitted)
    def forward(
        self,
        x: torch.Tensor,
        x_lens: torch.Tensor,
        y: torch.Tensor,
        y_lens: torch.Tensor,
        reduction: str = "sum",
    ) -> Tuple[torch.Tensor, Union[torch.Tensor, None]]:
        """
        Args:
          x:
            A 2-D tensor of shape (N, S).
          x_lens:
            A 1-D tensor of shape (N,). It contains the number of tokens in `x`
            before padding.
          y:
            A 3-D tensor of shape (N, T, 8).
          y_lens:
            A 1-D tensor of shape (N,). It contains the number of tokens in `x`
            before padding.
        Returns:
          Return the predicted audio code matrix, cross-entropy loss and Top-10 accuracy.
        """
        assert x.ndim == 2, x.shape
        assert x_lens.ndim == 1, x_lens.shape
        assert y.ndim == 3, y.shape
        assert y_lens.ndim == 1, y_lens.shape

        assert torch.all(x_lens > 0)

        # NOTE: x has been padded in TextTokenCollater
        x_mask = make_pad_mask(x_lens).to(x.device)

        x = self.text_embedding(x)
        x = self.text_prenet(x)
        x = self.text_position(x)

        total_loss, metrics = 0.0, {}

        y_mask = make_pad_mask(y_lens).to(y.device)
        y_mask_int = y_mask.type(torch.int64)

        codes = y.type(torch.int64) * (1 - y_mask_int.unsqueeze(dim=-1))

        # Training
        # AR Decoder
        def pad_y_eos(y, eos_id):
            y = F.pad(y, (0, 1), value=0) + eos_id * F.pad(
                y_mask_int, (0, 1), value=1
            )
            # inputs, targets
            return y[:, :-1], y[:, 1:]

        y, targets = pad_y_eos(codes[..., 0], eos_id=NUM_AUDIO_TOKENS)
        y_emb = self.audio_embeddings[0](y)
        y_emb = self.audio_prenet(y_emb)
        y_pos = self.audio_position(y_emb)

        y_len = y_lens.max()
        tgt_mask = torch.triu(
            torch.ones(y_len, y_len, device=y.device, dtype=torch.bool),
            diagonal=1,
        )
        y_dec, _ = self.ar_decoder(
            (y_pos, self.stage_embeddings[0].weight),
            x,
            tgt_mask=tgt_mask,
            tgt_key_padding_mask=y_mask,
            memory_mask=None,
            memory_key_padding_mask=x_mask,
        )
        logits = self.predict_layers[0](y_dec).permute(0, 2, 1)
        # loss
        total_loss = F.cross_entropy(logits, targets, reduction=reduction)
        metrics["ArTop10Accuracy"] = self.ar_accuracy_metric(
            logits.detach(), targets
        ).mean() * y_lens.sum().type(torch.float32)

        # Non-AR Decoders
        train_stage = self.rng.choices(
            (1, 2, 3, 4, 5, 6, 7), weights=[1.0 / 7] * 7, k=1
        )[0]
        for i in range(0, train_stage - 1):
            # Formula (4) (5)
            y_pos = y_pos + self.audio_embeddings[i + 1](codes[..., i + 1])
        targets = codes[..., train_stage] + NUM_AUDIO_TOKENS * y_mask_int

        y_dec, _ = self.nar_decoder(
            (y_pos, self.stage_embeddings[train_stage].weight),
            x,
            tgt_mask=None,
            tgt_key_padding_mask=y_mask,
            memory_mask=None,
            memory_key_padding_mask=x_mask,
        )
        logits = self.predict_layers[train_stage](y_dec).permute(0, 2, 1)
        # loss
        total_loss += F.cross_entropy(
            logits,
            targets,
            ignore_index=NUM_AUDIO_TOKENS,
            reduction=reduction,
        )
        metrics["NarTop10Accuracy"] = (
            self.nar_accuracy_metric(
                F.pad(
                    logits.detach(),
                    (0, 0, 1, 0, 0, 0),
                    value=logits.min().cpu().item(),
                ),
                targets,
            ).mean()
            * y_lens.sum().type(torch.float32)
        )

        return ((x, codes), total_loss / 2.0, metrics)
# ... (lines 318-702 omitted)
