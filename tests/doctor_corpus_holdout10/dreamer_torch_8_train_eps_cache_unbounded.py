# Source: https://github.com/jsikyoon/dreamer-torch/issues/8
#   code: dreamer.py (process_episode and the train_eps cache), tools.py (simulate,
#   save_episodes) and wrappers.py (CollectDataset) at commit 7c2331a
# Adapted: process_episode, simulate and CollectDataset kept as they are, with the logger
#   calls and the gif/video logging dropped and save_episodes writing the compressed episode to
#   an in-memory buffer instead of the train_eps directory; np.bool -> bool (removed from
#   numpy); dataset_size 0 as in the dmc config; the DeepMind-control environment -> a stand-in
#   with 32x32x3 image observations and episodes of 100 steps; the Dreamer agent -> a small
#   torch policy returning {'action': tensor} as Dreamer does (no world-model training, the
#   collection phase only); 60 episodes; cpu, seeded.
import datetime
import io
import uuid
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn


class CollectDataset:

  def __init__(self, env, callbacks=None, precision=32):
    self._env = env
    self._callbacks = callbacks or ()
    self._precision = precision
    self._episode = None

  def __getattr__(self, name):
    return getattr(self._env, name)

  def step(self, action):
    obs, reward, done, info = self._env.step(action)
    obs = {k: self._convert(v) for k, v in obs.items()}
    transition = obs.copy()
    if isinstance(action, dict):
      transition.update(action)
    else:
      transition['action'] = action
    transition['reward'] = reward
    transition['discount'] = info.get('discount', np.array(1 - float(done)))
    self._episode.append(transition)
    if done:
      for key, value in self._episode[1].items():
        if key not in self._episode[0]:
          self._episode[0][key] = 0 * value
      episode = {k: [t[k] for t in self._episode] for k in self._episode[0]}
      episode = {k: self._convert(v) for k, v in episode.items()}
      info['episode'] = episode
      for callback in self._callbacks:
        callback(episode)
    return obs, reward, done, info

  def reset(self):
    obs = self._env.reset()
    transition = obs.copy()
    transition['reward'] = 0.0
    transition['discount'] = 1.0
    self._episode = [transition]
    return obs

  def _convert(self, value):
    value = np.array(value)
    if np.issubdtype(value.dtype, np.floating):
      dtype = {16: np.float16, 32: np.float32, 64: np.float64}[self._precision]
    elif np.issubdtype(value.dtype, np.signedinteger):
      dtype = {16: np.int16, 32: np.int32, 64: np.int64}[self._precision]
    elif np.issubdtype(value.dtype, np.uint8):
      dtype = np.uint8
    else:
      raise NotImplementedError(value.dtype)
    return value.astype(dtype)


class ControlEnv:
  def __init__(self, seed, length=100):
    self._rng = np.random.RandomState(seed)
    self._length = length
    self._t = 0

  def reset(self):
    self._t = 0
    return {'image': self._rng.randint(0, 255, (32, 32, 3), dtype=np.uint8)}

  def step(self, action):
    self._t += 1
    obs = {'image': self._rng.randint(0, 255, (32, 32, 3), dtype=np.uint8)}
    return obs, float(self._rng.rand()), self._t >= self._length, {}


def save_episodes(directory, episodes):
  timestamp = datetime.datetime.now().strftime('%Y%m%dT%H%M%S')
  filenames = []
  for episode in episodes:
    identifier = str(uuid.uuid4().hex)
    length = len(episode['reward'])
    filename = f'{directory}/{timestamp}-{identifier}-{length}.npz'
    with io.BytesIO() as f1:
      np.savez_compressed(f1, **episode)
    filenames.append(filename)
  return filenames


def process_episode(config, mode, train_eps, eval_eps, episode):
  directory = dict(train=config.traindir, eval=config.evaldir)[mode]
  cache = dict(train=train_eps, eval=eval_eps)[mode]
  filename = save_episodes(directory, [episode])[0]
  length = len(episode['reward']) - 1
  score = float(episode['reward'].astype(np.float64).sum())
  if mode == 'eval':
    cache.clear()
  if mode == 'train' and config.dataset_size:
    total = 0
    for key, ep in reversed(sorted(cache.items(), key=lambda x: x[0])):
      if total <= config.dataset_size - length:
        total += len(ep['reward']) - 1
      else:
        del cache[key]
  cache[str(filename)] = episode
  print(f'{mode.title()} episode has {length} steps and return {score:.1f}.')


def simulate(agent, envs, steps=0, episodes=0, state=None):
  # Initialize or unpack simulation state.
  if state is None:
    step, episode = 0, 0
    done = np.ones(len(envs), bool)
    length = np.zeros(len(envs), np.int32)
    obs = [None] * len(envs)
    agent_state = None
    reward = [0]*len(envs)
  else:
    step, episode, done, length, obs, agent_state, reward = state
  while (steps and step < steps) or (episodes and episode < episodes):
    # Reset envs if necessary.
    if done.any():
      indices = [index for index, d in enumerate(done) if d]
      results = [envs[i].reset() for i in indices]
      for index, result in zip(indices, results):
        obs[index] = result
      reward = [reward[i]*(1-done[i]) for i in range(len(envs))]
    # Step agents.
    obs = {k: np.stack([o[k] for o in obs]) for k in obs[0]}
    action, agent_state = agent(obs, done, agent_state, reward)
    if isinstance(action, dict):
      action = [
          {k: np.array(action[k][i].detach().cpu()) for k in action}
          for i in range(len(envs))]
    else:
      action = np.array(action)
    assert len(action) == len(envs)
    # Step envs.
    results = [e.step(a) for e, a in zip(envs, action)]
    obs, reward, done = zip(*[p[:3] for p in results])
    obs = list(obs)
    reward = list(reward)
    done = np.stack(done)
    episode += int(done.sum())
    length += 1
    step += (done * length).sum()
    length *= (1 - done)

  return (step - steps, episode - episodes, done, length, obs, agent_state, reward)


class RandomPolicy(nn.Module):
  def __init__(self):
    super().__init__()
    self.net = nn.Sequential(nn.Flatten(), nn.Linear(32 * 32 * 3, 64), nn.ELU(), nn.Linear(64, 6))

  def forward(self, obs, done, state, reward):
    image = torch.as_tensor(obs['image'], dtype=torch.float32) / 255.0
    with torch.no_grad():
      action = torch.tanh(self.net(image.permute(0, 3, 1, 2)))
    return {'action': action}, state


np.random.seed(0)
torch.manual_seed(0)
config = SimpleNamespace(traindir='logdir/train_eps', evaldir='logdir/eval_eps', dataset_size=0)
train_eps, eval_eps = {}, {}
callbacks = [lambda episode: process_episode(config, 'train', train_eps, eval_eps, episode)]
train_envs = [CollectDataset(ControlEnv(0), callbacks)]
agent = RandomPolicy()

state = None
for collect in range(60):
  state = simulate(agent, train_envs, episodes=1, state=state)
print(len(train_eps), 'episodes kept')
