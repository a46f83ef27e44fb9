"""Graphs kept by a callee: a call that hands a graph-carrying value to a method that stores
it on its object (no torch).

``train_loss.update(loss)`` where ``Metric.update`` does ``self.sum += val``, or
``self.reporter.report(out)`` where ``report`` appends to ``self.values``: the value is kept
by an object that outlives the loop iteration, so every iteration's graph stays alive. The
callee is read through its summary (:mod:`torchmem.lint.summaries`), for the kinds of the
arguments at this call; only methods of classes of the linted file are resolved.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NamedTuple

from torchmem.lint.facts import key_of
from torchmem.lint.kinds import CONTAINER, GRAPH, TYPED
from torchmem.lint.knowledge import TARGET_NAME

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context, FunctionState, LoopState
    from torchmem.lint.summaries import Summary

__all__ = ["CalleeStore", "callee_store", "accumulating_method", "is_plain_tensor"]


class CalleeStore(NamedTuple):
    """A graph-carrying argument ``arg`` that the called method keeps in ``container``."""

    arg: ast.expr
    summary: Summary
    container: str
    line: int
    loops: list[LoopState]


def callee_store(call: ast.Call, ctx: Context) -> CalleeStore | None:
    """The store, if ``call`` is a bound method call of a class of this file whose summary
    adds a graph-carrying argument of this call to ``self.*``, and the object outlives the
    iterations of the enclosing loops."""
    summaries = ctx.summaries
    func = call.func
    if summaries is None or type(func) is not ast.Attribute or ctx.fn is None:
        return None
    recv = func.value  # type: ignore[attr-defined]
    if type(recv) is ast.Subscript:  # metrics[k].update(v): the container outlives the loop
        recv = recv.value  # type: ignore[attr-defined]
    owner = key_of(recv)
    if owner is None:
        return None
    args = [a for a in call.args if type(a) is not ast.Starred] + [
        kw.value for kw in call.keywords if kw.arg is not None]
    graph = [a for a in args if ctx.kind(a) & GRAPH]
    if len(graph) != 1:
        return None  # none, or several: the summary cannot tell which one is kept
    summary = summaries.summarize(call, ctx.fn.flow)
    if summary is None or not summary.stores:
        return None
    loops = ctx.loops if owner == "self" else ctx.persistent_loops(owner)
    if ctx.loops and not loops:
        return None  # the object is made anew in each iteration
    container, line = summary.stores[0]
    return CalleeStore(graph[0], summary, container, line, list(loops))


def is_plain_tensor(node: ast.expr, ctx: Context) -> bool:
    kind = ctx.kind(node)
    return bool(kind & TYPED) and not kind & CONTAINER


#: methods that set an object up rather than accumulate into it
_SETUP = frozenset({"__init__", "__post_init__", "__setstate__", "reset", "setup"})
#: base classes whose methods the framework already runs without autograd recording
#: (``torchmetrics.Metric.forward`` runs ``update`` under ``torch.set_grad_enabled(False)``)
_NO_GRAD_BASES = ("torchmetrics",)


def accumulating_method(state: FunctionState, ctx: Context
                        ) -> list[tuple[ast.expr, int, str]]:
    """``(value, kind, container)`` for each value a public method of a plain class (not an
    ``nn.Module``, whose ``forward`` state is judged elsewhere) adds to ``self.*``
    (``+=``, ``append``, ``d[k] = v``) that is computed from its tensor-annotated
    parameters with autograd recording on."""
    summaries = ctx.summaries
    cls_name = state.class_name
    if summaries is None or cls_name is None or ctx.in_module_class or state.no_grad or \
            state.name in _SETUP or state.name.startswith("_") and state.name != "__call__":
        return []  # a private method is judged at its callers, with their argument kinds
    cls = summaries.classes.get(cls_name)
    node = state.node
    if cls is None or node not in cls.body or not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    for base in cls.bases:
        qual = ctx.qualname(base) or ""
        if qual.startswith(_NO_GRAD_BASES):
            return []
    summary = summaries.if_given_graphs(node, cls, ctx)
    if summary is None:
        return []
    return [(value, kind, key) for (key, _), (value, kind) in zip(summary.stores, summary.kept)
            if not _only_targets(value, ctx)]


def _only_targets(value: ast.expr, ctx: Context) -> bool:
    """Whether ``value`` is computed from target-like names only (``y``, ``labels``,
    ``target``): a training loop passes labels without a graph, so keeping them is fine."""
    names = {n.id for n in ast.walk(value) if type(n) is ast.Name and n.id != "self"
             and n.id not in ctx.imports}
    return bool(names) and all(TARGET_NAME.match(n) for n in names)
