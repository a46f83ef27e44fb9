"""Whether a loop trains through the functions it calls (no torch).

A loop whose own body has no ``backward()`` is still a training loop when it calls a
function of the file that runs one: ``self._backward(loss)``, ``train_step(batch)``, a
top-level function imported from another file of the tree, or a method of an instance the
script builds at its top level (``trainer.train_step(x, y)`` with ``trainer = Trainer(...)``
under ``if __name__ == "__main__":``). Read through :class:`~torchmem.lint.summaries.Summaries`
(its functions, classes, imports and memo tables).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.gather import calls_autograd_grad, gather

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.summaries import Summaries

__all__ = ["loop_trains", "runs_backward"]


def loop_trains(summaries: Summaries, loop: ast.AST, class_name: str | None) -> bool:
    """Whether the body of ``loop`` calls a function of this file that runs
    ``backward()`` or an optimizer step (``self._backward(loss)``, ``train_step(b)``):
    then the loop is a training loop although its own body has no backward."""
    memo = summaries._trains
    if id(loop) in memo:
        return memo[id(loop)]
    memo[id(loop)] = False
    found = False
    for node in ast.walk(loop):
        if type(node) is not ast.Call:
            continue
        func = node.func
        target = None
        if type(func) is ast.Name:
            target = summaries.functions.get(func.id)
            if target is None and summaries.walker is not None:
                other = summaries.imported(summaries.walker.ctx.imports.get(func.id))
                target = other[0] if other else None
        elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                func.value.id == "self" and class_name in summaries.classes:
            target = summaries._method(summaries.classes[class_name], func.attr)  # type: ignore[index]
        elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                func.value.id in summaries.module_instances:  # trainer.train_step(batch)
            cls = summaries.classes[summaries.module_instances[func.value.id]]
            target = summaries._method(cls, func.attr)
        if target is not None and runs_backward(summaries, target):
            found = True
            break
    memo[id(loop)] = found
    return found


def runs_backward(summaries: Summaries, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether function ``node`` runs ``backward()``, an optimizer step or
    ``torch.autograd.grad`` itself (memoised on ``summaries``)."""
    cached = summaries._backward.get(id(node))
    if cached is None:
        facts = gather(node.body, lambda n: None)
        # `torch.autograd.grad(...)` differentiates as `backward()` does (a saliency
        # method's `_getGradients`): it needs the graph its forward records
        cached = facts.has_backward or facts.has_step or calls_autograd_grad(node)
        summaries._backward[id(node)] = cached
    return cached
