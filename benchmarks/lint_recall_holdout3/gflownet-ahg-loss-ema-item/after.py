# Source: https://github.com/alexhernandezgarcia/gflownet/blob/5c73856159a357c67f3faf865dd737096b9f7184/gflownet/gflownet.py
# Adapted excerpt, after the fix https://github.com/alexhernandezgarcia/gflownet/commit/5c73856159a357c67f3faf865dd737096b9f7184
# (trimmed to the code the fix touches; omitted lines are marked).
"""
GFlowNet
TODO:
    - Seeds
"""
import copy
import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import yaml
from omegaconf import OmegaConf
from scipy.special import logsumexp
from torch.distributions import Bernoulli, Categorical
from tqdm import tqdm

from gflownet.utils.buffer import Buffer
from gflownet.utils.common import set_device, set_float_precision, torch2np


class GFlowNetAgent:
    ...  # (lines 29-583 omitted)
    def trajectorybalance_loss(self, it, batch, loginf=1000):
        ...  # (lines 585-654 omitted)
        # Forward trajectories
        policy_output_f = self.forward_policy(self.env.statetorch2policy(parents))
        logprobs_f = self.env.get_logprobs(
            policy_output_f, True, actions, states, masks_f, loginf
        )
        sumlogprobs_f = torch.zeros(
            len(torch.unique(traj_id, sorted=True)),
            dtype=self.float,
            device=self.device,
        ).index_add_(0, traj_id, logprobs_f)
        # Backward trajectories
        policy_output_b = self.backward_policy(self.env.statetorch2policy(states))
        logprobs_b = self.env.get_logprobs(
            policy_output_b, False, actions, parents, masks_b, loginf
        )
        sumlogprobs_b = torch.zeros(
            len(torch.unique(traj_id, sorted=True)),
            dtype=self.float,
            device=self.device,
        ).index_add_(0, traj_id, logprobs_b)
        # Sort rewards of done states by ascending traj id
        rewards = rewards[done.eq(1)][torch.argsort(traj_id[done.eq(1)])]
        # Trajectory balance loss
        loss = (
            (self.logZ.sum() + sumlogprobs_f - sumlogprobs_b - torch.log(rewards))
            .pow(2)
            .mean()
        )
        return (loss, loss, loss), rewards

    ...  # (lines 685-702 omitted)
    def train(self):
        # Metrics
        all_losses = []
        all_visited = []
        loss_term_ema = None
        loss_flow_ema = None
        # Generate list of environments
        envs = [self.env.copy().reset() for _ in range(self.batch_size)]
        # Train loop
        pbar = tqdm(range(1, self.n_train_steps + 1), disable=not self.logger.progress)
        for it in pbar:
            # Test
            if self.logger.do_test(it):
                self.l1, self.kl, self.jsd, figs = self.test()
                self.logger.log_test_metrics(
                    self.l1, self.kl, self.jsd, it, self.use_context
                )
                self.logger.log_plots(figs, it, self.use_context)
            t0_iter = time.time()
            data = []
            for j in range(self.sttr):
                batch, times = self.sample_batch(envs)
                data += batch
            for j in range(self.ttsr):
                if self.loss == "flowmatch":
                    losses, rewards = self.flowmatch_loss(
                        it * self.ttsr + j, data
                    )  # returns (opt loss, *metrics)
                elif self.loss == "trajectorybalance":
                    losses, rewards = self.trajectorybalance_loss(
                        it * self.ttsr + j, data
                    )  # returns (opt loss, *metrics)
                else:
                    print("Unknown loss!")
                if not all([torch.isfinite(loss) for loss in losses]):
                    if self.logger.debug:
                        print("Loss is not finite - skipping iteration")
                    if len(all_losses) > 0:
                        all_losses.append([loss for loss in all_losses[-1]])
                else:
                    losses[0].backward()
                    if self.clip_grad_norm > 0:
                        torch.nn.utils.clip_grad_norm_(
                            self.parameters(), self.clip_grad_norm
                        )
                    self.opt.step()
                    self.lr_scheduler.step()
                    self.opt.zero_grad()
                    all_losses.append([i.item() for i in losses])
            # Buffer
            t0_buffer = time.time()
            states_term, trajs_term = self.unpack_terminal_states(batch)
            proxy_vals = self.env.reward2proxy(rewards).tolist()
            rewards = rewards.tolist()
            self.buffer.add(states_term, trajs_term, rewards, proxy_vals, it)
            self.buffer.add(
                states_term, trajs_term, rewards, proxy_vals, it, buffer="replay"
            )
            t1_buffer = time.time()
            times.update({"buffer": t1_buffer - t0_buffer})
            # Log
            if self.logger.lightweight:
                all_losses = all_losses[-100:]
                all_visited = states_term
            else:
                all_visited.extend(states_term)
            # Progress bar
            self.logger.progressbar_update(
                pbar, all_losses, rewards, self.jsd, it, self.use_context
            )
            # Train logs
            t0_log = time.time()
            self.logger.log_train(
                losses=losses,
                rewards=rewards,
                proxy_vals=proxy_vals,
                states_term=states_term,
                batch_size=len(data),
                logz=self.logZ,
                learning_rates=self.lr_scheduler.get_last_lr(),
                step=it,
                use_context=self.use_context,
            )
            t1_log = time.time()
            times.update({"log": t1_log - t0_log})
            # Save intermediate models
            t0_model = time.time()
            self.logger.save_models(self.forward_policy, self.backward_policy, step=it)
            t1_model = time.time()
            times.update({"save_interim_model": t1_model - t0_model})

            # Moving average of the loss for early stopping
            if loss_term_ema and loss_flow_ema:
                loss_term_ema = (
                    self.ema_alpha * losses[1].item() + (1.0 - self.ema_alpha) * loss_term_ema
                )
                loss_flow_ema = (
                    self.ema_alpha * losses[2].item() + (1.0 - self.ema_alpha) * loss_flow_ema
                )
                if (
                    loss_term_ema < self.early_stopping
                    and loss_flow_ema < self.early_stopping
                ):
                    break
            else:
                loss_term_ema = losses[1].item()
                loss_flow_ema = losses[2].item()

            # Log times
            t1_iter = time.time()
            times.update({"iter": t1_iter - t0_iter})
            self.logger.log_time(times, use_context=self.use_context)

        # Save final model
        self.logger.save_models(self.forward_policy, self.backward_policy, final=True)
        # Close logger
        if self.use_context == False:
            self.logger.end()

    ...  # (lines 822-1169 omitted)
