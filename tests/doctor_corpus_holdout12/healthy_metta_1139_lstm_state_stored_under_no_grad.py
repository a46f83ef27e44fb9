# Source: https://github.com/Metta-AI/metta/pull/1139
#   code: metta/rl/trainer.py (MettaTrainer._rollout) and metta/rl/experience.py (Experience) at the parent of d00107eb
# Adapted: the vectorised environment is a stub returning random observations, the policy is a small
# LSTM policy, Experience keeps only the buffers the rollout touches, sizes are small, 3 rollouts of
# 2 environments x 64 steps on CPU; the timer and stats code is left out.
from typing import Dict, Optional

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor


class PolicyState:
    def __init__(self):
        self.lstm_h = None
        self.lstm_c = None


class Policy(nn.Module):
    def __init__(self, obs_size=128, hidden_size=256, num_actions=9, num_lstm_layers=2):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(obs_size, hidden_size), nn.ReLU())
        self.lstm = nn.LSTM(hidden_size, hidden_size, num_layers=num_lstm_layers)
        self.actor = nn.Linear(hidden_size, num_actions)
        self.critic = nn.Linear(hidden_size, 1)

    def forward(self, o, state):
        x = self.encoder(o).unsqueeze(0)
        x, (h, c) = self.lstm(x, (state.lstm_h, state.lstm_c))
        state.lstm_h, state.lstm_c = h, c
        logits = self.actor(x[0])
        dist = torch.distributions.Categorical(logits=logits)
        actions = dist.sample()
        return actions, dist.log_prob(actions), dist.entropy(), self.critic(x[0]), logits


class Experience:
    def __init__(self, total_agents, batch_size, bptt_horizon, obs_size, hidden_size, num_lstm_layers=2):
        self.total_agents = total_agents
        self.bptt_horizon = bptt_horizon
        self.segments = batch_size // bptt_horizon
        self.obs = torch.zeros(self.segments, bptt_horizon, obs_size)
        self.actions = torch.zeros(self.segments, bptt_horizon, dtype=torch.int32)
        self.values = torch.zeros(self.segments, bptt_horizon)
        self.logprobs = torch.zeros(self.segments, bptt_horizon)
        self.rewards = torch.zeros(self.segments, bptt_horizon)
        self.dones = torch.zeros(self.segments, bptt_horizon)
        self.ep_lengths = torch.zeros(total_agents, dtype=torch.int32)
        self._range_tensor = torch.arange(total_agents, dtype=torch.int32)
        self.ep_indices = self._range_tensor % self.segments
        self.free_idx = total_agents % self.segments
        self.full_rows = 0
        self.lstm_h: Dict[int, Tensor] = {0: torch.zeros(num_lstm_layers, total_agents, hidden_size)}
        self.lstm_c: Dict[int, Tensor] = {0: torch.zeros(num_lstm_layers, total_agents, hidden_size)}

    @property
    def ready_for_training(self) -> bool:
        return self.full_rows >= self.segments

    def store(self, obs, actions, logprobs, rewards, dones, values, env_id: slice, mask,
              lstm_state: Optional[Dict[str, Tensor]] = None) -> int:
        num_steps = mask.sum().item()
        episode_length = self.ep_lengths[env_id.start].item()
        indices = self.ep_indices[env_id]
        batch_slice = (indices, episode_length)
        self.obs[batch_slice] = obs
        self.actions[batch_slice] = actions.int()
        self.logprobs[batch_slice] = logprobs
        self.rewards[batch_slice] = rewards
        self.dones[batch_slice] = dones.float()
        self.values[batch_slice] = values
        self.ep_lengths[env_id] += 1
        if episode_length + 1 >= self.bptt_horizon:
            num_full = env_id.stop - env_id.start
            self.ep_indices[env_id] = (self.free_idx + self._range_tensor[:num_full]) % self.segments
            self.ep_lengths[env_id] = 0
            self.free_idx = (self.free_idx + num_full) % self.segments
            self.full_rows += num_full
        if lstm_state is not None and env_id.start in self.lstm_h:
            self.lstm_h[env_id.start] = lstm_state["lstm_h"]
            self.lstm_c[env_id.start] = lstm_state["lstm_c"]
        return int(num_steps)

    def get_lstm_state(self, env_id_start):
        if env_id_start not in self.lstm_h:
            return None, None
        return self.lstm_h[env_id_start], self.lstm_c[env_id_start]

    def reset_for_rollout(self):
        self.full_rows = 0
        self.free_idx = self.total_agents % self.segments
        self.ep_indices = self._range_tensor % self.segments
        self.ep_lengths.zero_()


class VecEnv:
    def __init__(self, num_envs, obs_size):
        self.num_envs, self.obs_size = num_envs, obs_size

    def recv(self):
        o = np.random.rand(self.num_envs, self.obs_size).astype(np.float32)
        r = np.random.rand(self.num_envs).astype(np.float32)
        d = np.zeros(self.num_envs, dtype=bool)
        return o, r, d, d.copy(), [], np.arange(self.num_envs), np.ones(self.num_envs, dtype=bool)

    def send(self, actions):
        pass


def rollout(policy, experience, vecenv):
    experience.reset_for_rollout()
    while not experience.ready_for_training:
        o, r, d, t, info, env_id, mask = vecenv.recv()
        training_env_id = slice(env_id[0], env_id[-1] + 1)
        mask = torch.as_tensor(mask)
        o = torch.as_tensor(o)
        r = torch.as_tensor(r)
        d = torch.as_tensor(d)
        with torch.no_grad():
            state = PolicyState()
            lstm_h, lstm_c = experience.get_lstm_state(training_env_id.start)
            if lstm_h is not None:
                state.lstm_h = lstm_h
                state.lstm_c = lstm_c
            actions, selected_action_log_probs, _, value, _ = policy(o, state)
            lstm_state_to_store = None
            if state.lstm_h is not None:
                lstm_state_to_store = {"lstm_h": state.lstm_h, "lstm_c": state.lstm_c}
        value = value.flatten()
        experience.store(obs=o, actions=actions, logprobs=selected_action_log_probs, rewards=r, dones=d,
                         values=value, env_id=training_env_id, mask=mask, lstm_state=lstm_state_to_store)
        vecenv.send(actions.cpu().numpy().astype(np.int32))


policy = Policy()
experience = Experience(total_agents=2, batch_size=128, bptt_horizon=64, obs_size=128, hidden_size=256)
vecenv = VecEnv(2, 128)
for epoch in range(3):
    rollout(policy, experience, vecenv)
    print(f"epoch {epoch}: mean reward {experience.rewards.mean().item():.3f}")
