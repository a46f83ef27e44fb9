# Source: https://github.com/Kaixhin/Rainbow/blob/de446cc47ae4ab5eb1e899880765c3ab11eda168/memory.py
# Adapted excerpt, after the fix https://github.com/Kaixhin/Rainbow/commit/de446cc47ae4ab5eb1e899880765c3ab11eda168
# (trimmed to the code the fix touches; omitted lines are marked).
import random
from collections import namedtuple
import torch
import numpy as np
# ... (lines 5-11 omitted)
class SegmentTree():
  def __init__(self, size):
    self.index = 0
    self.size = size
    self.full = False  # Used to track actual capacity
    self.sum_tree = [0] * (2 * size - 1)  # Initialise fixed size tree with all (priority) zeros
    self.data = [None] * size  # Wrap-around cyclic buffer
    self.max = 1  # Initial max value to return (1 = 1^ω)

  # Propagates value up tree given a tree index
  def _propagate(self, index, value):
    parent = (index - 1) // 2
    left, right = 2 * parent + 1, 2 * parent + 2
    self.sum_tree[parent] = self.sum_tree[left] + self.sum_tree[right]
    if parent != 0:
      self._propagate(parent, value)

  # Updates value given a tree index
  def update(self, index, value):
    self.sum_tree[index] = value  # Set new value
    self._propagate(index, value)  # Propagate value
    self.max = max(value, self.max)

# ... (lines 35-64 omitted)
class ReplayMemory():
  ...  # (lines 66-136 omitted)
  def update_priorities(self, idxs, priorities):
    priorities = np.power(priorities, self.priority_exponent)
    [self.transitions.update(idx, priority) for idx, priority in zip(idxs, priorities)]
# --- from agent.py (same commit) ---
import torch
# ... (lines 4-8 omitted)
class Agent():
  ...  # (lines 10-47 omitted)
  def learn(self, mem):
    ...  # (lines 49-80 omitted)
    loss = -torch.sum(m * log_ps_a, 1)  # Cross-entropy loss (minimises DKL(m||p(s_t, a_t)))
    self.online_net.zero_grad()
    (weights * loss).mean().backward()  # Backpropagate importance-weighted minibatch loss
    self.optimiser.step()

    mem.update_priorities(idxs, loss.detach().cpu().numpy())  # Update priorities of sampled transitions
