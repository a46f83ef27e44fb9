"""A graph born in a method folded into its object's state (no torch).

``self._avg.add_(rate * (adv_sq - self._avg))`` in a policy's ``loss()`` method, where
``adv_sq`` comes from the model's output computed in that method: the attribute becomes a
tensor whose graph reaches its previous value, so each call chains its graph, and the
activations it saved, onto the object, for as long as the object lives
(:mod:`torchmem.lint.folds` recognises the statement).

This rule reads the method on its own: the graph must be visible there (a forward pass run
in the method, a tensor that requires grad). A method folding an *argument* it is given is
reported where it is called with a graph-carrying value, through its summary
(:mod:`torchmem.lint.rules._callee_stores`). Not read: ``forward`` of an ``nn.Module``
(:mod:`torchmem.lint.rules._buffer_fold` judges buffers there), set-up methods
(``__init__``, ``reset``), code under ``torch.no_grad()``, and a method that detaches the
attribute itself (``self._avg = self._avg.detach()``).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.folds import folded_state
from torchmem.lint.rules._buffer_fold import cuts_graph

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["state_fold"]

_SETUP = frozenset({"__init__", "__post_init__", "__setstate__", "reset", "setup", "forward",
                    "reset_parameters", "_reset_parameters"})


def state_fold(node: ast.AST, ctx: Context) -> tuple[str, ast.expr] | None:
    """``(X, value)`` when ``node``, in a method of a class of the file, folds a graph the
    method computes into ``self.X`` (see the module docstring)."""
    fn = ctx.fn
    summaries = ctx.summaries
    if fn is None or ctx.no_grad or fn.class_name is None or fn.name in _SETUP or \
            summaries is None:
        return None
    cls = summaries.classes.get(fn.class_name)
    if cls is None or not any(s is fn.node for s in cls.body):
        return None
    found = folded_state(node, ctx)
    if found is None or cuts_graph(fn.node, found[0]):
        return None
    return found
