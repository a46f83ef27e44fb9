"""TMM105: step outputs that PyTorch Lightning keeps until the end of the epoch.

Part of the TMM1xx family (:mod:`torchmem.lint.rules.graph`): before Lightning 2.0, a
module that overrides ``training_epoch_end`` (or ``validation_epoch_end``,
``test_epoch_end``) gets the list of everything its ``*_step`` returned during the epoch,
so Lightning keeps every step's outputs alive until the epoch ends.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import GRAPH, LEAF, TENSOR
from torchmem.lint.registry import Rule, register
from torchmem.lint.stored import keeps_graph

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["StepOutputsKept"]

#: step method -> the epoch-end hook that receives its outputs (Lightning < 2.0)
_EPOCH_END = {"training_step": "training_epoch_end", "validation_step": "validation_epoch_end",
              "test_step": "test_epoch_end"}
#: keys Lightning itself consumes
_CONSUMED = frozenset({"loss", "log", "progress_bar", "hiddens"})


def _epoch_end(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            return stmt
    return None


def _does_nothing(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body of ``pass``, ``...`` and docstrings only."""
    return all(isinstance(s, ast.Pass) or isinstance(s, ast.Expr) and isinstance(
        s.value, ast.Constant) for s in fn.body)


def _through_call(value: ast.expr, ctx: Context) -> bool:
    """A name whose every assignment in the step is a call the linter cannot see into made
    on a graph-carrying tensor (``self.criterion(preds, y)``): its result is taken to carry
    the graph, as for a value stored on an object (:func:`~torchmem.lint.stored.keeps_graph`)."""
    if type(value) is not ast.Name or ctx.kind(value) or ctx.fn is None:
        return False
    defs = ctx.fn.facts.defs.get(value.id)
    return bool(defs) and all(type(d) is ast.Call and keeps_graph(d, ctx) for d in defs)


def _detached(value: ast.expr, ctx: Context) -> bool:
    """``x.detach()`` (or ``.item()``/``.tolist()``), or a name whose every assignment in
    the step is one: a value the author chose to keep without its graph."""
    if type(value) is ast.Name and ctx.fn is not None:
        defs = ctx.fn.facts.defs.get(value.id)
        return bool(defs) and all(type(d) is ast.Call and _detached(d, ctx) for d in defs)
    return type(value) is ast.Call and type(value.func) is ast.Attribute and \
        value.func.attr in _DETACHING and not value.args


#: methods whose result keeps no graph
_DETACHING = frozenset({"detach", "item", "tolist"})


@register
class StepOutputsKept(Rule):
    """A Lightning step returns tensors besides the loss that the epoch-end hook keeps.

    What:
        Flags ``return {"loss": loss, "preds": preds, ...}`` in ``training_step`` (or
        ``validation_step``/``test_step``) of a class that also defines the matching
        ``training_epoch_end`` (``validation_epoch_end``, ``test_epoch_end``), when an
        entry other than ``loss`` is a tensor, or a name whose every assignment in the
        step is a call the linter cannot see into made on a graph-carrying tensor
        (``part = self.loss_fn(preds[:, :2], y)``: taken to carry the graph). An entry
        returned ``.detach()``-ed (directly or through a name bound only to such calls)
        is not reported.

    Why:
        Before Lightning 2.0, overriding ``*_epoch_end(outputs)`` makes Lightning collect
        every step's return value for the whole epoch. Tensors returned next to the loss
        (predictions, targets, logits) therefore stay alive, on the device they were
        computed on, until the epoch ends: memory grows with every step. An epoch-end hook
        that does nothing with ``outputs`` pays this for nothing.

    Known problems:
        Lightning 2.0 removed these hooks (defining them raises an error), so the rule
        only concerns code written for Lightning 1.x. Whether the tensors are small (a
        batch of class indices) is not known statically. A detached tensor still stays on
        its device until the epoch ends, but it is what real projects' fixes return (the
        author chose to keep the value), so it is not reported.

    Example:
        ```python
        class Classifier(LightningModule):
            def training_step(self, batch, batch_idx):
                x, y = batch
                logits = self(x)
                loss = F.cross_entropy(logits, y)
                return {"loss": loss, "preds": logits.argmax(1), "targets": y}

            def training_epoch_end(self, outputs):
                pass
        ```

    Use instead:
        ```python
        class Classifier(LightningModule):
            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self(x), y)
                return {"loss": loss}

            def training_epoch_end(self, outputs):
                pass
        ```
    """

    code = "TMM105"
    name = "step-outputs-kept"
    summary = "Lightning step returns tensors that *_epoch_end keeps for the whole epoch"

    def visit_Return(self, node: ast.Return, ctx: Context) -> None:
        fn = ctx.fn
        value = node.value
        if fn is None or fn.class_name is None or type(value) is not ast.Dict or \
                fn.name not in _EPOCH_END or ctx.summaries is None:
            return
        cls = ctx.summaries.classes.get(fn.class_name)
        if cls is None or not any(s is fn.node for s in cls.body):
            return
        hook = _epoch_end(cls, _EPOCH_END[fn.name])
        if hook is None:
            return
        kept = [k.value for k, v in zip(value.keys, value.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
                and k.value not in _CONSUMED and not _detached(v, ctx)
                and (ctx.kind(v) & (GRAPH | LEAF | TENSOR) or _through_call(v, ctx))]
        if not kept:
            return
        names = ", ".join(f"'{k}'" for k in kept)
        unused = " (which does nothing with them)" if _does_nothing(hook) else ""
        ctx.report(self, value, (
            f"{fn.name}() returns {names} besides the loss, and {hook.name}() is defined"
            f"{unused}: Lightning (before 2.0) keeps every step's outputs until the epoch "
            f"ends, so these tensors accumulate over the epoch; return only the loss, or "
            f"detached CPU copies (.detach().cpu()) of what {hook.name}() needs"))
