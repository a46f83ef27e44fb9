# Source: https://github.com/k4ntz/SCoBots/pull/4
#   code: select_action, finish_episode and train() of src/xrl/agents/policies/reinforce.py
#   and policy_net of src/xrl/agents/policies/policy_model.py at 4ec28fb^ (the state the pull
#   request fixed): train() adds each episode's policy loss to pnl_buffer without detaching it
# Adapted: the Atari environment and the feature extraction (env_manager, agent image_to_feature
#   / feature_to_mf, gametype) replaced by a stand-in environment that returns a 24-value feature
#   vector and a reward; cfg is a namespace with the used fields (40 episodes of at most 60
#   steps, log_steps 20); the stale-window feedback logic, csv and tensorboard logging, RTPT
#   and checkpointing dropped; cpu, seeded.
import math
import random
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

dev = torch.device("cpu")


class policy_net(nn.Module):
    def __init__(self, input, hidden, actions, make_hidden=True):
        super(policy_net, self).__init__()
        self.h = nn.Linear(input, hidden)
        self.groupNorm = nn.GroupNorm(4, hidden)
        self.out = nn.Linear(hidden, actions)

        self.saved_log_probs = []
        self.rewards = []
        self.entropies = []

    def forward(self, x):
        x = self.h(x)
        x = self.groupNorm(x)
        x = F.relu(x)
        return F.softmax(self.out(x), dim=1)


class PongFeatures:
    "Stand-in for the environment: a feature vector per step, reward -1/0/1, episodes of varying length."
    def __init__(self, n_features=24):
        self.n_features = n_features

    def reset(self):
        self.t = 0
        return np.random.rand(self.n_features)

    def step(self, action):
        self.t += 1
        reward = random.choice([-1.0, 0.0, 0.0, 0.0, 1.0])
        terminated = self.t >= 20 and random.random() < 0.05
        return np.random.rand(self.n_features), reward, terminated, False, {}


def select_action(features, policy, random_tr=-1, n_actions=3):
    input = torch.tensor(features).unsqueeze(0).float().to(dev)
    probs = policy(input)
    sampler = Categorical(probs)
    action = sampler.sample()
    log_prob = sampler.log_prob(action)
    if random.random() <= random_tr:
        action = random.randint(0, n_actions - 1)
    else:
        action = action.item()
    return action, log_prob, probs.detach().cpu().numpy()


def finish_episode(policy, optimizer, eps, cfg):
    R = 0
    entropy_alpha = cfg.train.entropy_alpha
    policy_loss = []
    returns = []
    for r, e in zip(policy.rewards[::-1], policy.entropies[::-1]):
        R = r + entropy_alpha * e + cfg.train.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns, device=dev)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append((-log_prob * R))
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    episode_entropy = np.mean(policy.entropies)
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    del policy.entropies[:]
    return policy, optimizer, policy_loss, episode_entropy


def train(cfg):
    torch.manual_seed(cfg.seed)
    env = PongFeatures()
    n_actions = 3
    features = env.reset()
    policy = policy_net(len(features), cfg.train.hidden_layer_size, n_actions, cfg.train.make_hidden)
    policy.to(dev)
    optimizer = optim.Adam(policy.parameters(), lr=cfg.train.learning_rate)
    eps = np.finfo(np.float32).eps.item()
    i_episode = 1

    running_reward = None
    cr_buffer = 0
    nr_buffer = 0
    pnl_buffer = 0
    pne_buffer = 0
    step_buffer = 0

    while i_episode < cfg.train.num_episodes:
        features, ep_comb_reward, ep_natural_reward = env.reset(), 0, 0
        t = 0
        while t < cfg.train.max_steps:
            action, log_prob, probs = select_action(features, policy, cfg.train.random_action_p, n_actions)
            policy.saved_log_probs.append(log_prob)
            features, natural_reward, terminated, truncated, info = env.step(action)
            comb_reward = natural_reward
            entropy = -np.sum(list(map(lambda p: p * (np.log(p) / np.log(n_actions)) if p[0] != 0 else 0, probs)))
            policy.rewards.append(comb_reward)
            policy.entropies.append(entropy)
            ep_comb_reward += comb_reward
            ep_natural_reward += natural_reward
            t += 1
            if terminated or truncated:
                break

        if running_reward is None:
            running_reward = ep_comb_reward
        else:
            running_reward = 0.05 * ep_comb_reward + (1 - 0.05) * running_reward

        cr_buffer += ep_comb_reward
        nr_buffer += ep_natural_reward

        policy, optimizer, loss, ep_entropy = finish_episode(policy, optimizer, eps, cfg)
        print('Episode {}\tLast reward: {:.2f}\tRunning reward: {:.2f}\tEntropy: {:.2f}\tSteps: {}'.format(
            i_episode, ep_comb_reward, running_reward, ep_entropy, t))

        pnl_buffer += loss
        pne_buffer += ep_entropy
        step_buffer += t

        if i_episode % cfg.train.log_steps == 0:
            avg_r = cr_buffer / cfg.train.log_steps
            avg_pnl = pnl_buffer / cfg.train.log_steps
            avg_step = step_buffer / cfg.train.log_steps
            print('avg reward', avg_r, 'avg loss', avg_pnl.item(), 'avg steps', avg_step)
            cr_buffer = 0
            nr_buffer = 0
            pnl_buffer = 0
            pne_buffer = 0
            step_buffer = 0

        i_episode += 1


random.seed(0)
np.random.seed(0)
cfg = SimpleNamespace(seed=0, train=SimpleNamespace(
    entropy_alpha=0.01, gamma=0.97, hidden_layer_size=32, make_hidden=True, learning_rate=1e-3,
    num_episodes=41, max_steps=60, random_action_p=0.05, log_steps=20))
train(cfg)
