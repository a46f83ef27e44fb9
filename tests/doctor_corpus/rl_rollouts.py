"""REINFORCE on a toy bandit-like environment with episode objects."""

import torch
import torch.nn as nn


class Transition:
    def __init__(self, episode, obs, action, reward):
        self.episode = episode
        self.obs = obs
        self.action = action
        self.reward = reward


class Episode:
    def __init__(self):
        self.transitions = []

    def add(self, obs, action, reward):
        self.transitions.append(Transition(self, obs, action, reward))

    def returns(self, gamma=0.99):
        out, g = [], 0.0
        for t in reversed(self.transitions):
            g = t.reward + gamma * g
            out.append(g)
        return torch.tensor(out[::-1])


class Policy(nn.Module):
    def __init__(self, obs_dim=256, n_actions=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, n_actions))

    def forward(self, obs):
        return torch.distributions.Categorical(logits=self.net(obs))


def collect(policy, horizon=8, envs=32, obs_dim=256):
    episode = Episode()
    log_probs = []
    for _ in range(horizon):
        obs = torch.randn(envs, obs_dim)
        dist = policy(obs)
        action = dist.sample()
        reward = float((action == obs[:, :4].argmax(1)).float().mean())
        log_probs.append(dist.log_prob(action))
        episode.add(obs, action, reward)
    return episode, torch.stack(log_probs)


def main():
    torch.manual_seed(0)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for update in range(40):
        episode, log_probs = collect(policy)
        returns = episode.returns()
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        loss = -(log_probs.mean(1) * returns).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if update % 10 == 0:
            print(f"update {update} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
