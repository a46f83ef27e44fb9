# Source: https://github.com/Eclectic-Sheep/sheeprl/issues/198
#   code: sheeprl/algos/dreamer_v3/agent.py (PlayerDV3.init_states, get_greedy_action;
#   RSSM._representation, _uniform_mix) and the player set-up of
#   sheeprl/algos/dreamer_v3/evaluate.py at commit 0e88153; the loop is the reporter's
#   (get_greedy_action, then env.step, without torch.no_grad())
# Adapted: Lightning Fabric, hydra and gymnasium are not installed: the encoder is an MLP over
#   a 32-value vector observation instead of the 64x64 RGB CNN, the recurrent model a GRU cell
#   with a linear input layer, stochastic state 8 categoricals of 8 classes instead of 32x32,
#   recurrent state 128, one environment (a random-observation stand-in with the step
#   interface, episodes of 500 steps), a one-hot discrete actor with 4 actions; 400 steps.
from typing import Dict, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import OneHotCategoricalStraightThrough


def compute_stochastic_state(logits, discrete=8, sample=True):
    logits = logits.view(*logits.shape[:-1], -1, discrete)
    dist = OneHotCategoricalStraightThrough(logits=logits)
    return dist.rsample() if sample else dist.mode


class RecurrentModel(nn.Module):
    def __init__(self, input_size, recurrent_state_size, dense_units=64):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(input_size, dense_units), nn.LayerNorm(dense_units), nn.SiLU())
        self.rnn = nn.GRUCell(dense_units, recurrent_state_size)

    def forward(self, input, recurrent_state):
        feat = self.mlp(input)
        return self.rnn(feat.flatten(0, 1), recurrent_state.flatten(0, 1)).view_as(recurrent_state)


class RSSM(nn.Module):
    def __init__(self, recurrent_model, representation_model, transition_model, discrete=8, unimix=0.01):
        super().__init__()
        self.recurrent_model = recurrent_model
        self.representation_model = representation_model
        self.transition_model = transition_model
        self.discrete = discrete
        self.unimix = unimix

    def _uniform_mix(self, logits):
        dim = logits.dim()
        if dim == 3:
            logits = logits.view(*logits.shape[:-1], -1, self.discrete)
        if self.unimix > 0.0:
            probs = logits.softmax(dim=-1)
            uniform = torch.ones_like(probs) / self.discrete
            probs = (1 - self.unimix) * probs + self.unimix * uniform
            logits = torch.log(probs)
        if dim == 3:
            logits = logits.view(*logits.shape[:-2], -1)
        return logits

    def _representation(self, recurrent_state, embedded_obs):
        logits = self.representation_model(torch.cat((recurrent_state, embedded_obs), -1))
        logits = self._uniform_mix(logits)
        return logits, compute_stochastic_state(logits, discrete=self.discrete)

    def _transition(self, recurrent_out, sample_state=True):
        logits = self._uniform_mix(self.transition_model(recurrent_out))
        return logits, compute_stochastic_state(logits, discrete=self.discrete, sample=sample_state)


class Actor(nn.Module):
    def __init__(self, latent_state_size, actions_dim):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(latent_state_size, 64), nn.LayerNorm(64), nn.SiLU())
        self.heads = nn.ModuleList([nn.Linear(64, d) for d in actions_dim])

    def forward(self, state, is_training=True, mask=None):
        out = self.model(state)
        actions = []
        for head in self.heads:
            dist = OneHotCategoricalStraightThrough(logits=head(out))
            actions.append(dist.rsample() if is_training else dist.mode)
        return tuple(actions), None


class PlayerDV3(nn.Module):
    def __init__(self, encoder, rssm, actor, actions_dim, num_envs, stochastic_size, recurrent_state_size,
                 device="cpu", discrete_size=8):
        super().__init__()
        self.encoder = encoder
        self.rssm = rssm
        self.actor = actor
        self.device = device
        self.actions_dim = actions_dim
        self.stochastic_size = stochastic_size
        self.discrete_size = discrete_size
        self.recurrent_state_size = recurrent_state_size
        self.num_envs = num_envs

    @torch.no_grad()
    def init_states(self, reset_envs: Optional[Sequence[int]] = None) -> None:
        self.actions = torch.zeros(1, self.num_envs, np.sum(self.actions_dim), device=self.device)
        self.recurrent_state = torch.tanh(torch.zeros(1, self.num_envs, self.recurrent_state_size, device=self.device))
        self.stochastic_state = self.rssm._transition(self.recurrent_state, sample_state=False)[1].reshape(
            1, self.num_envs, -1)

    def get_greedy_action(self, obs: Dict[str, torch.Tensor], is_training: bool = True, mask=None):
        embedded_obs = self.encoder(obs["state"])
        self.recurrent_state = self.rssm.recurrent_model(
            torch.cat((self.stochastic_state, self.actions), -1), self.recurrent_state
        )
        _, self.stochastic_state = self.rssm._representation(self.recurrent_state, embedded_obs)
        self.stochastic_state = self.stochastic_state.view(
            *self.stochastic_state.shape[:-2], self.stochastic_size * self.discrete_size
        )
        actions, _ = self.actor(torch.cat((self.stochastic_state, self.recurrent_state), -1), is_training, mask)
        self.actions = torch.cat(actions, -1)
        return actions


class VectorEnv:
    def __init__(self, num_envs=1, obs_dim=32, episode_len=500):
        self.num_envs, self.obs_dim, self.episode_len, self.t = num_envs, obs_dim, episode_len, 0

    def reset(self):
        self.t = 0
        return {"state": np.random.randn(self.num_envs, self.obs_dim).astype(np.float32)}, {}

    def step(self, actions):
        self.t += 1
        obs = {"state": np.random.randn(self.num_envs, self.obs_dim).astype(np.float32)}
        reward = (actions == 1).astype(np.float32)
        done = np.array([self.t >= self.episode_len] * self.num_envs)
        return obs, reward, done, done, {}


torch.manual_seed(0)
np.random.seed(0)
stochastic_size, discrete_size, recurrent_state_size, actions_dim = 8, 8, 128, (4,)
encoder = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.SiLU())
rssm = RSSM(RecurrentModel(stochastic_size * discrete_size + sum(actions_dim), recurrent_state_size),
            nn.Sequential(nn.Linear(recurrent_state_size + 64, 64), nn.SiLU(), nn.Linear(64, stochastic_size * discrete_size)),
            nn.Sequential(nn.Linear(recurrent_state_size, 64), nn.SiLU(), nn.Linear(64, stochastic_size * discrete_size)),
            discrete=discrete_size)
actor = Actor(stochastic_size * discrete_size + recurrent_state_size, actions_dim)
player = PlayerDV3(encoder, rssm, actor, actions_dim, 1, stochastic_size, recurrent_state_size, discrete_size=discrete_size)
env = VectorEnv()
obs, _ = env.reset()
player.init_states()
total_reward = 0.0
for step in range(400):
    torch_obs = {k: torch.from_numpy(v).view(1, 1, -1) for k, v in obs.items()}
    real_actions = player.get_greedy_action(torch_obs, is_training=False)
    real_actions = torch.cat([a.argmax(dim=-1) for a in real_actions], dim=-1).cpu().numpy()
    obs, reward, done, truncated, info = env.step(real_actions.reshape(env.num_envs))
    total_reward += float(reward.sum())
print("reward", total_reward)
