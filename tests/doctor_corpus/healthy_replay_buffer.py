"""DQN-style updates from a preallocated replay buffer (a large constant working set)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ReplayBuffer:
    def __init__(self, capacity, obs_dim):
        self.obs = torch.zeros(capacity, obs_dim)
        self.next_obs = torch.zeros(capacity, obs_dim)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.capacity = capacity
        self.size = 0
        self.pos = 0

    def add(self, obs, action, reward, next_obs):
        n = obs.size(0)
        idx = (torch.arange(n) + self.pos) % self.capacity
        self.obs[idx] = obs
        self.next_obs[idx] = next_obs
        self.actions[idx] = action
        self.rewards[idx] = reward
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch):
        idx = torch.randint(0, self.size, (batch,))
        return self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx]


def main():
    torch.manual_seed(0)
    obs_dim, n_actions = 128, 6
    buffer = ReplayBuffer(capacity=20000, obs_dim=obs_dim)
    q = nn.Sequential(nn.Linear(obs_dim, 256), nn.ReLU(), nn.Linear(256, n_actions))
    target = nn.Sequential(nn.Linear(obs_dim, 256), nn.ReLU(), nn.Linear(256, n_actions))
    target.load_state_dict(q.state_dict())
    optimizer = torch.optim.Adam(q.parameters(), lr=1e-3)
    for step in range(40):
        obs = torch.randn(64, obs_dim)
        with torch.no_grad():
            action = q(obs).argmax(1)
        buffer.add(obs, action, torch.randn(64), obs + 0.1 * torch.randn(64, obs_dim))
        o, a, r, o2 = buffer.sample(128)
        with torch.no_grad():
            y = r + 0.99 * target(o2).max(1).values
        loss = F.smooth_l1_loss(q(o).gather(1, a[:, None]).squeeze(1), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            target.load_state_dict(q.state_dict())
            print(f"step {step} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
