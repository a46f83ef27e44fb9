# Source: https://github.com/mmcdermott/MEDS_EIC_AR/blob/1eb99e3e68894e2f61c698c04a362819a05617b9/src/MEDS_EIC_AR/training/module.py
# Adapted excerpt, after the fix https://github.com/mmcdermott/MEDS_EIC_AR/commit/1eb99e3e68894e2f61c698c04a362819a05617b9
# (trimmed to the code the fix touches; omitted lines are marked).
"""PyTorch Lightning module for the MEDS-EIC-AR autoregressive model.

:class:`MEICARModule` wraps :class:`~MEDS_EIC_AR.model.Model` and owns the optimizer / LR scheduler
construction, the next-code metric collection, the resume-safe config fingerprinting, and the
interleaved N-sample predict path that feeds :mod:`MEDS_EIC_AR.generation`. See
:mod:`MEDS_EIC_AR.training` README for a higher-level overview.
"""

import copy
import logging
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Literal

import hydra
import lightning as L
import torch
from meds import held_out_split, train_split, tuning_split
from meds_torchdata import MEDSTorchBatch
from transformers.modeling_outputs import CausalLMOutputWithPast

from ..generation.repeated_dataset import PredictBatch
from ..model import Model
from .metrics import NextCodeMetrics
# ... (lines 27-125 omitted)
class MEICARModule(L.LightningModule):
    """A LightningModule for training and evaluating the MEICAR model."""

    ...  # (lines 129-477 omitted)
    def predict_step(self, batch: PredictBatch) -> dict[str, torch.Tensor]:
        """Produces generated trajectories for a given batch of data.

        Expects the :data:`PredictBatch` shape yielded by
        :func:`MEDS_EIC_AR.generation.collate_with_meta` — a three-tuple
        ``(batch, subject_idxs, trajectory_idxs)`` — as produced by the expanded dataset that
        ``MEICAR_generate_trajectories`` builds. The bare-``MEDSTorchBatch`` form supported by the
        prior iteration is no longer accepted; callers wanting a single trajectory per subject
        should set ``n_trajectories=1`` on :class:`RepeatedPredictionDataset`, which still yields
        this tuple shape (just with a trivial ``trajectory_idxs`` axis).

        Any keyword arguments stashed on ``self.generation_kwargs`` (typically set from the
        top-level ``generate_trajectories`` CLI before ``trainer.predict`` is invoked) are
        forwarded to :meth:`MEDS_EIC_AR.model.model.Model.generate`. This is how
        rolling-generation settings such as ``max_new_tokens`` and ``rolling_context_size`` reach
        the model at prediction time without going through the saved Lightning hparams.

        Returns a dict with:
            - ``tokens``: ``[B, L]`` generated-token tensor from the model.
            - ``subject_idxs``: ``[B]`` long tensor, which base-dataset subject each row came from.
            - ``trajectory_idxs``: ``[B]`` long tensor, which of the N trajectories-per-subject
              each row corresponds to.

        All three tensors are detached and moved to CPU before returning. ``Trainer.predict``
        accumulates per-batch returns in a Python list across the entire predict run (scaled by
        ``n_trajectories`` via the expanded dataset), so leaving them on-device would pin per-batch
        GPU allocations for the full pass and OOM on non-trivial cohorts. Downstream demux and
        ``format_trajectories`` run on CPU anyway.
        """
        mdata_batch, subject_idxs, trajectory_idxs = batch
        tokens = self.model.generate(mdata_batch, **self.generation_kwargs)
        return {
            "tokens": tokens.detach().cpu(),
            "subject_idxs": subject_idxs.detach().cpu(),
            "trajectory_idxs": trajectory_idxs.detach().cpu(),
        }
