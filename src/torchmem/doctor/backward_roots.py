"""Which kept tensors a ``backward(retain_graph=True)`` started from.

``backward(retain_graph=True)`` leaves every node it ran through holding its saved
tensors, as if no backward had run. Two kinds of kept graphs follow from it:

* the tensor a retained backward started from is kept (``loss.backward(retain_graph=True)``
  then ``losses.append(loss)``): the flag is why its graph still holds its saved
  activations, and ``backward_flags_graph`` says so;
* a tensor computed from the same forward but never backpropagated is kept (a loss for a
  report, computed after the retained backwards): it holds its graph because it is kept,
  with or without the flag; its nodes look untouched whether or not a backward ran through
  them, so they prove neither an evaluation graph nor a graph the flag kept
  (``retained_graph``).

:class:`BackwardRoots` records weak references to the tensors each retained backward
(without ``create_graph``) starts from; :meth:`BackwardRoots.count` says, per path, how
many of the tensors a snapshot sampled there are such roots.

Cost: per retained backward, one weak reference per root tensor (a dict entry removed
when the tensor dies, at most :data:`MAX_ROOTS` alive); per snapshot, one look-up per
sampled tensor. Nothing is kept alive.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["BackwardRoots", "MAX_ROOTS"]

#: root tensors tracked at once (live ones); more are not recorded
MAX_ROOTS = 1 << 14


class BackwardRoots:
    """Weak references to the tensors retained backwards started from."""

    def __init__(self) -> None:
        self._refs: dict[int, weakref.ref[Any]] = {}

    def __len__(self) -> int:
        return len(self._refs)

    def record(self, tensors: Any) -> None:
        """Record the root tensor(s) of one ``backward(retain_graph=True)`` call."""
        import torch

        roots = (tensors,) if isinstance(tensors, torch.Tensor) else tensors
        if not isinstance(roots, (tuple, list)):
            return
        refs = self._refs
        for t in roots[:8]:
            if not isinstance(t, torch.Tensor) or len(refs) >= MAX_ROOTS:
                continue
            key = id(t)
            old = refs.get(key)
            if old is not None and old() is t:
                continue
            try:
                refs[key] = weakref.ref(t, lambda r, key=key, refs=refs: (
                    refs.pop(key, None) if refs.get(key) is r else None))
            except TypeError:  # a tensor type without weak references
                continue

    def is_root(self, t: Any) -> bool:
        """Whether ``t`` (alive) is a tensor a retained backward started from."""
        ref = self._refs.get(id(t))
        return ref is not None and ref() is t

    def count(self, samples: dict[str, list[Any]]) -> dict[str, int]:
        """Path -> how many of its sampled tensors (weak references) are roots."""
        if not self._refs:
            return {}
        out = {}
        for path, refs in samples.items():
            n = sum(1 for r in refs if (t := r()) is not None and self.is_root(t))
            if n:
                out[path] = n
        return out
