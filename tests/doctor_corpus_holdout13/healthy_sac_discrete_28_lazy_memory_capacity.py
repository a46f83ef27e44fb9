# Source: https://github.com/toshikwa/sac-discrete.pytorch/issues/28
#   code: sacd/memory/base.py (LazyMemory, LazyMultiStepMemory), sacd/agent/base.py
#   (BaseAgent.train_episode, learn) and sacd/agent/sacd.py (SacdAgent) at the time
# Adapted: the Atari environment is a stand-in with the same reset/step interface returning
#   uint8 frame stacks of 4x42x42 (random frames, episodes of 150 steps); the conv networks
#   are small MLPs over the flattened frames; memory_size 300 instead of 300000, start_steps
#   100, update_interval 4, 1500 steps; no tensorboard writer, evaluation or checkpoints;
#   update_params and disable_gradients from sacd/utils.py inlined.
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical
from torch.optim import Adam


class LazyMemory(dict):
    def __init__(self, capacity, state_shape, device):
        super().__init__()
        self.capacity = int(capacity)
        self.state_shape = state_shape
        self.device = device
        self.reset()

    def reset(self):
        self['state'] = []
        self['next_state'] = []
        self['action'] = np.empty((self.capacity, 1), dtype=np.int64)
        self['reward'] = np.empty((self.capacity, 1), dtype=np.float32)
        self['done'] = np.empty((self.capacity, 1), dtype=np.float32)
        self._n = 0
        self._p = 0

    def append(self, state, action, reward, next_state, done):
        self['state'].append(state)
        self['next_state'].append(next_state)
        self['action'][self._p] = action
        self['reward'][self._p] = reward
        self['done'][self._p] = done
        self._n = min(self._n + 1, self.capacity)
        self._p = (self._p + 1) % self.capacity
        self.truncate()

    def truncate(self):
        while len(self['state']) > self.capacity:
            del self['state'][0]
            del self['next_state'][0]

    def sample(self, batch_size):
        indices = np.random.randint(low=0, high=len(self), size=batch_size)
        bias = -self._p if self._n == self.capacity else 0
        states = np.empty((batch_size, *self.state_shape), dtype=np.uint8)
        next_states = np.empty((batch_size, *self.state_shape), dtype=np.uint8)
        for i, index in enumerate(indices):
            _index = np.mod(index + bias, self.capacity)
            states[i, ...] = self['state'][_index]
            next_states[i, ...] = self['next_state'][_index]
        states = torch.FloatTensor(states).to(self.device) / 255.
        next_states = torch.FloatTensor(next_states).to(self.device).float() / 255.
        actions = torch.LongTensor(self['action'][indices]).to(self.device)
        rewards = torch.FloatTensor(self['reward'][indices]).to(self.device)
        dones = torch.FloatTensor(self['done'][indices]).to(self.device)
        return states, actions, rewards, next_states, dones

    def __len__(self):
        return self._n


class FrameEnv:
    shape, n = (4, 42, 42), 6

    def reset(self):
        self.t = 0
        return np.random.randint(0, 255, self.shape, dtype=np.uint8)

    def step(self, action):
        self.t += 1
        return np.random.randint(0, 255, self.shape, dtype=np.uint8), float(action == 2), self.t >= 150, {}


def mlp(out):
    return nn.Sequential(nn.Flatten(), nn.Linear(4 * 42 * 42, 64), nn.ReLU(), nn.Linear(64, out))


class CateoricalPolicy(nn.Module):
    def __init__(self, num_actions):
        super().__init__()
        self.head = mlp(num_actions)

    def sample(self, states):
        action_probs = torch.softmax(self.head(states), dim=1)
        actions = Categorical(action_probs).sample().view(-1, 1)
        z = (action_probs == 0.0).float() * 1e-8
        return actions, action_probs, torch.log(action_probs + z)


class TwinnedQNetwork(nn.Module):
    def __init__(self, num_actions):
        super().__init__()
        self.Q1, self.Q2 = mlp(num_actions), mlp(num_actions)

    def forward(self, states):
        return self.Q1(states), self.Q2(states)


def update_params(optim, loss):
    optim.zero_grad()
    loss.backward()
    optim.step()


class SacdAgent:
    def __init__(self, env, num_steps=1500, batch_size=32, lr=3e-4, memory_size=300, gamma=0.99,
                 start_steps=100, update_interval=4, target_update_interval=400):
        self.env, self.num_steps, self.batch_size, self.gamma_n = env, num_steps, batch_size, gamma
        self.start_steps, self.update_interval, self.target_update_interval = start_steps, update_interval, target_update_interval
        self.memory = LazyMemory(memory_size, env.shape, "cpu")
        self.policy = CateoricalPolicy(env.n)
        self.online_critic = TwinnedQNetwork(env.n)
        self.target_critic = TwinnedQNetwork(env.n).eval()
        self.target_critic.load_state_dict(self.online_critic.state_dict())
        for p in self.target_critic.parameters():
            p.requires_grad = False
        self.policy_optim = Adam(self.policy.parameters(), lr=lr)
        self.q1_optim = Adam(self.online_critic.Q1.parameters(), lr=lr)
        self.q2_optim = Adam(self.online_critic.Q2.parameters(), lr=lr)
        self.target_entropy = -np.log(1.0 / env.n) * 0.98
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha = self.log_alpha.exp()
        self.alpha_optim = Adam([self.log_alpha], lr=lr)
        self.steps = 0

    def explore(self, state):
        state = torch.FloatTensor(state[None, ...]) / 255.
        with torch.no_grad():
            action, _, _ = self.policy.sample(state)
        return action.item()

    def learn(self):
        states, actions, rewards, next_states, dones = self.memory.sample(self.batch_size)
        curr_q1, curr_q2 = self.online_critic(states)
        curr_q1, curr_q2 = curr_q1.gather(1, actions), curr_q2.gather(1, actions)
        with torch.no_grad():
            _, action_probs, log_action_probs = self.policy.sample(next_states)
            next_q1, next_q2 = self.target_critic(next_states)
            next_q = (action_probs * (torch.min(next_q1, next_q2) - self.alpha * log_action_probs)).sum(dim=1, keepdim=True)
        target_q = rewards + (1.0 - dones) * self.gamma_n * next_q
        q1_loss = torch.mean((curr_q1 - target_q).pow(2))
        q2_loss = torch.mean((curr_q2 - target_q).pow(2))
        _, action_probs, log_action_probs = self.policy.sample(states)
        with torch.no_grad():
            q1, q2 = self.online_critic(states)
        entropies = -torch.sum(action_probs * log_action_probs, dim=1, keepdim=True)
        q = torch.sum(torch.min(q1, q2) * action_probs, dim=1, keepdim=True)
        policy_loss = (-q - self.alpha * entropies).mean()
        entropy_loss = -torch.mean(self.log_alpha * (self.target_entropy - entropies.detach()))
        update_params(self.q1_optim, q1_loss)
        update_params(self.q2_optim, q2_loss)
        update_params(self.policy_optim, policy_loss)
        update_params(self.alpha_optim, entropy_loss)
        self.alpha = self.log_alpha.exp()

    def train_episode(self):
        episode_return, done = 0., False
        state = self.env.reset()
        while not done:
            action = np.random.randint(self.env.n) if self.start_steps > self.steps else self.explore(state)
            next_state, reward, done, _ = self.env.step(action)
            self.memory.append(state, action, max(min(reward, 1.0), -1.0), next_state, done)
            self.steps += 1
            episode_return += reward
            state = next_state
            if self.steps % self.update_interval == 0 and self.steps >= self.start_steps:
                self.learn()
            if self.steps % self.target_update_interval == 0:
                self.target_critic.load_state_dict(self.online_critic.state_dict())
        print(f'steps {self.steps:<5} return {episode_return:<5.1f}')


torch.manual_seed(0)
np.random.seed(0)
agent = SacdAgent(FrameEnv())
while agent.steps < agent.num_steps:
    agent.train_episode()
