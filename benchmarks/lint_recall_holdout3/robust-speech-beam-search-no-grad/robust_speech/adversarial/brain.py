# Source: https://github.com/RaphaelOlivier/robust_speech/blob/2e71f58ba96b48506f9b951afb1a880ffc006368/robust_speech/adversarial/brain.py
# Adapted excerpt, context file at the parent of https://github.com/RaphaelOlivier/robust_speech/commit/94647ecb8d91613b86535a50fba586d3961a9de6
# (trimmed to the code the fix touches; omitted lines are marked).
"""
Multiple Brain classes that extend sb.Brain to enable attacks.
"""

import logging
import time
import warnings
import importlib
import os
from shutil import which
from xml.dom import NotFoundErr

import speechbrain as sb
import torch
from speechbrain.dataio.dataloader import LoopedLoader
from speechbrain.utils.distributed import run_on_main
from torch.utils.data import DataLoader
from tqdm import tqdm
import numpy as np
import robust_speech as rs
from robust_speech.adversarial.attacks.attacker import Attacker, TrainableAttacker
from robust_speech.adversarial.defenses.vote import ROVER_MAX_HYPS, ROVER_RECOMMENDED_HYPS, VoteEnsemble, Rover, MajorityVote


import pdb
from copy import deepcopy

warnings.simplefilter("once", RuntimeWarning)

logger = logging.getLogger(__name__)

# Define training procedure


# ... (lines 35-127 omitted)
class AdvASRBrain(ASRBrain):
    ...  # (lines 129-278 omitted)
    def compute_forward_adversarial(self, batch, stage):
        ...  # (lines 280-299 omitted)

        assert stage != rs.Stage.ATTACK
        wavs = batch.sig[0]
        if self.attacker is not None:
            if stage == sb.Stage.TEST:
                adv_wavs = self.attacker.perturb_and_log(batch)
            else:
                adv_wavs = self.attacker.perturb(batch)
            adv_wavs = adv_wavs.detach()
            batch.sig = adv_wavs, batch.sig[1]
        res = self.compute_forward(batch, stage)
        batch.sig = wavs, batch.sig[1]
        return res, adv_wavs

    ...  # (lines 314-425 omitted)
    def evaluate_batch(self, batch, stage):
        ...  # (lines 427-446 omitted)
        if self.voting_module is not None:
            out = self.compute_forward_with_voting(
                batch, stage)
        else:
            out = self.compute_forward(batch, stage=stage)
        loss = self.compute_objectives(out, batch, stage=stage)
        return loss.detach().cpu()

    def evaluate_batch_adversarial(self, batch, stage, target=None):
        """Evaluate one batch on adversarial examples.

        The default implementation depends on two methods being defined
        with a particular behavior:

        * ``compute_forward()``
        * ``compute_objectives()``

        Arguments
        ---------
        batch : list of torch.Tensors
            Batch of data to use for evaluation. Default implementation assumes
            this batch has two elements: inputs and targets.
        stage : Stage
            The stage of the experiment: Stage.VALID, Stage.TEST
        target : str
            The optional attack target

        Returns
        -------
        detached loss
        """
        tokenizer = (
            self.tokenizer if hasattr(
                self, "tokenizer") else self.hparams.tokenizer
        )
        if target is not None and self.attacker.targeted:
            batch_to_attack = target.replace_tokens_in_batch(
                batch, tokenizer, self.hparams
            )
        else:
            batch_to_attack = batch
        #print("original input",adv_wav.mean())
        predictions, adv_wav = self.compute_forward_adversarial(
            batch_to_attack, stage=stage
        )
        #print("generated or loaded adv",adv_wav.mean())
        advloss, targetloss = None, None
        with torch.no_grad():
            targeted = target is not None and self.attacker.targeted
            batch_to_attack.sig = adv_wav, batch_to_attack.sig[1]

            if self.voting_module is not None:
                predictions = self.compute_forward_with_voting(
                    batch_to_attack, stage)

            loss = self.compute_objectives(
                predictions, batch_to_attack, stage=stage, adv=True, targeted=targeted
            ).detach()
            if targeted:
                targetloss = loss
                batch.sig = adv_wav, batch.sig[1]
                if self.voting_module is not None:
                    predictions = self.compute_forward_with_voting(
                        batch, stage)
                else:
                    predictions = self.compute_forward(batch, stage=stage)
                advloss = self.compute_objectives(
                    predictions, batch, stage=stage, adv=True, targeted=False
                ).detach()
                batch.sig = batch_to_attack.sig
            else:
                advloss = loss

        return advloss, targetloss

    ...  # (lines 522-1144 omitted)
