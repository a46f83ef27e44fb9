# Source: https://github.com/RaphaelOlivier/robust_speech/blob/94647ecb8d91613b86535a50fba586d3961a9de6/robust_speech/models/transformer.py
# Adapted excerpt, after the fix https://github.com/RaphaelOlivier/robust_speech/commit/94647ecb8d91613b86535a50fba586d3961a9de6
# (trimmed to the code the fix touches; omitted lines are marked).
"""A Transformer ASR system with librispeech supporting adversarial attacks.
The system employs an encoder, a decoder, and an attention mechanism
between them. Decoding is performed with (CTC/Att joint) beamsearch 
coupled with a neural language model.

Inspired from SpeechBrain Transformer 
(https://github.com/speechbrain/speechbrain/blob/develop/recipes/LibriSpeech/ASR/transformer/train.py)
"""
import logging
import os
import sys

import speechbrain as sb
import torch

import robust_speech as rs
from robust_speech.adversarial.brain import AdvASRBrain

logger = logging.getLogger(__name__)


# Define training procedure
class TrfASR(AdvASRBrain):
    """
    Encoder-decoder models using Transformers
    """

    def compute_forward(self, batch, stage):
        """Forward computations from the waveform batches to the output probabilities."""
        if not stage == rs.Stage.ATTACK:
            batch = batch.to(self.device)
        wavs, wav_lens = batch.sig
        tokens_bos, _ = batch.tokens_bos

        if hasattr(self.hparams, "smoothing") and self.hparams.smoothing:
            wavs = self.hparams.smoothing(wavs, wav_lens)

        # Add augmentation if specified
        if stage == sb.Stage.TRAIN:
            if hasattr(self.modules, "env_corrupt"):
                wavs_noise = self.modules.env_corrupt(wavs, wav_lens)
                wavs = torch.cat([wavs, wavs_noise], dim=0)
                wav_lens = torch.cat([wav_lens, wav_lens])
                tokens_bos = torch.cat([tokens_bos, tokens_bos], dim=0)

        # compute features
        feats = self.hparams.compute_features(
            wavs) if self.hparams.compute_features is not None else wavs
        current_epoch = self.hparams.epoch_counter.current
        feats = self.modules.normalize(feats, wav_lens, epoch=current_epoch)

        if stage == sb.Stage.TRAIN:
            if hasattr(self.hparams, "augmentation"):
                feats = self.hparams.augmentation(feats)

        # forward modules
        src = self.modules.CNN(feats)
        enc_out, pred = self.modules.Transformer(
            src, tokens_bos, wav_lens, pad_idx=self.hparams.pad_index
        )

        p_ctc = None
        if self.hparams.ctc_weight > 0.0:
            # output layer for ctc log-probabilities
            logits = self.modules.ctc_lin(enc_out)
            p_ctc = self.hparams.log_softmax(logits)

        p_seq = None
        if self.hparams.ctc_weight < 1.:
            # output layer for seq2seq log-probabilities
            pred = self.modules.seq_lin(pred)
            p_seq = self.hparams.log_softmax(pred)
            
        # Compute outputs
        with torch.no_grad():
            hyps = None
            if stage == sb.Stage.TRAIN or stage == rs.Stage.ATTACK:
                hyps = None
            elif stage == sb.Stage.VALID:
                hyps = None
                current_epoch = self.hparams.epoch_counter.current
                # for the sake of efficiency, we only perform beamsearch with limited capacity
                # and no LM to give user some idea of how the AM is doing
                hyps, _ = self.hparams.valid_search(enc_out.detach(), wav_lens)
            else:
                hyps, _ = self.hparams.test_search(enc_out.detach(), wav_lens)

        return p_ctc, p_seq, wav_lens, hyps

    ...  # (lines 90-240 omitted)
