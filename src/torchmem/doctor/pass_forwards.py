"""Evidence for evaluation passes that ``model.eval()`` does not announce.

A training step runs the script's top-level modules a few times (the model and its loss
module, a GAN's two networks, k micro-batches summed into one loss) and then
``backward()`` or an optimizer step. :class:`ForwardCount` counts the top-level forwards
between those boundaries (:mod:`torchmem.doctor.top_forwards`) and keeps the most a step
has had: a run of forwards longer than twice that, with no boundary, is a *candidate*
evaluation pass. A long policy-gradient episode looks the same until its ``backward()``
goes through the episode's graphs, so :class:`Consumption` asks the autograd graph: a
pre-hook on the ``grad_fn`` of the output of each grad-enabled forward of the candidate
(the first :data:`KEEP_FIRST` forwards and the latest :data:`KEEP_LAST`) records whether
a backward reached it. The forwards from the first one a backward reached to the end
belong to the training step after the pass (they are cut off); when that is the
candidate's first forward, the whole run was one training step and no pass.

Cost: during training steps one increment per top-level forward. During a candidate
pass, one ``register_prehook`` per grad-enabled forward (a hook that sets one flag if a
backward reaches it; it holds no tensor and goes with the graph or when the pass is
judged).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["ForwardCount", "Consumption", "KEEP_FIRST", "KEEP_LAST"]

#: grad-enabled forwards of a candidate watched from its start...
KEEP_FIRST = 64
#: ...and at its end (the forwards of the training step that ends it)
KEEP_LAST = 64


class ForwardCount:
    """Top-level forwards since the last training-step boundary, and the most a step had.

    Attributes:
        since: forwards since the last boundary.
        usual: the most forwards between two boundaries so far (None before the first).
    """

    def __init__(self) -> None:
        self.since = 0
        self.usual: int | None = None

    def boundary(self, counted: bool = True) -> None:
        """A ``backward()`` or optimizer step; ``counted``: the forwards since the last one
        were a training step's (not an evaluation pass's)."""
        if counted and self.since:
            self.step_had(self.since)
        self.since = 0

    def step_had(self, forwards: int) -> None:
        """A training step had ``forwards`` top-level forwards."""
        self.usual = max(self.usual or 0, forwards)

    def exceeded(self) -> bool:
        """True when the forwards since the last boundary are more than two steps' worth."""
        return self.usual is not None and self.since > 2 * self.usual


def _grad_node(output: Any) -> Any:
    """The ``grad_fn`` of the first tensor of a forward's output that has one (or None)."""
    if isinstance(output, torch.Tensor):
        return output.grad_fn
    values: Any = ()
    if isinstance(output, dict):
        values = list(output.values())[:4]
    elif isinstance(output, (tuple, list)):
        values = output[:4]
    for value in values:
        if isinstance(value, torch.Tensor) and value.grad_fn is not None:
            return value.grad_fn
    return None


class Consumption:
    """Which forwards of a candidate pass a backward went through.

    Each entry is ``[counter, grad, reached, handle]``; ``reached`` becomes True in the hook
    (a forward without grad or whose output has no graph has no hook).
    """

    def __init__(self) -> None:
        self.entries: list[list[Any]] = []

    def watch(self, counter: int, grad: bool, output: Any) -> None:
        """Hook the graph of the forward numbered ``counter`` (when its output has one)."""
        entry: list[Any] = [counter, grad, False, None]
        node = _grad_node(output) if grad else None
        if node is not None:
            def reached(grad_outputs: Any) -> None:
                entry[2] = True

            try:
                entry[3] = node.register_prehook(reached)
            except (RuntimeError, AttributeError):
                entry[3] = None
        self.entries.append(entry)
        if len(self.entries) > KEEP_FIRST + KEEP_LAST:
            dropped = self.entries.pop(KEEP_FIRST)
            if dropped[3] is not None:
                dropped[3].remove()

    def first_reached(self) -> int | None:
        """The counter of the first watched forward a backward went through."""
        return next((e[0] for e in self.entries if e[2]), None)

    def grad_forwards_from(self, counter: int) -> int:
        """Grad-enabled forwards numbered ``counter`` or later (among those kept)."""
        return sum(1 for e in self.entries if e[0] >= counter and e[1])

    def release(self) -> None:
        """Remove every hook still attached to a graph."""
        for entry in self.entries:
            if entry[3] is not None:
                entry[3].remove()
        self.entries.clear()
