# Source: https://github.com/Kaixhin/Rainbow/blob/de04b85dc136ba60fe5b9cede3a7a772e021ccac/memory.py
# Adapted excerpt, before the fix https://github.com/Kaixhin/Rainbow/commit/de446cc47ae4ab5eb1e899880765c3ab11eda168
# (trimmed to the code the fix touches; omitted lines are marked).
import random
from collections import namedtuple
import torch
# ... (lines 4-10 omitted)
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

# ... (lines 34-63 omitted)
class ReplayMemory():
  ...  # (lines 65-134 omitted)
  def update_priorities(self, idxs, priorities):
    priorities.pow_(self.priority_exponent)
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

    mem.update_priorities(idxs, loss.detach())  # Update priorities of sampled transitions
