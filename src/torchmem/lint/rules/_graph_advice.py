"""How a graph-carrying value is kept without its graph, in words valid for its type
(TMM101's advice): the operand that carries the graph (``loss`` in ``loss * n``), whether it
is known to be a tensor (``.detach()`` on a tuple or a model output raises), and the
advice for each way it is kept (append, add, store, concatenate).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import CONTAINER, GRAPH, TYPED
from torchmem.lint.rules._common import describe

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["SIMPLE", "graph_part", "known_tensor", "advice"]

_DETACH_FIX = {"append": "keep {v}.detach() (or {v}.item() for a scalar)",
               "add": "add {v}.item() (or {v}.detach())",
               "store": "store {v}.detach()",
               "concat": "concatenate {v}.detach()"}
SIMPLE = (ast.Name, ast.Attribute, ast.Subscript, ast.Call)


def graph_part(value: ast.expr, ctx: Context) -> ast.expr:
    """The operand of ``value`` that carries the graph: ``loss`` in ``loss * x.size(0)``,
    ``float(a) + b`` -> ``b``; ``value`` itself when it is not arithmetic or when several
    operands carry one."""
    while True:
        t = type(value)
        if t is ast.BinOp:
            parts = [value.left, value.right]  # type: ignore[attr-defined]
        elif t is ast.UnaryOp:
            parts = [value.operand]  # type: ignore[attr-defined]
        else:
            return value
        graph = [p for p in parts if ctx.kind(p) & GRAPH]
        if len(graph) != 1:
            return value
        value = graph[0]


def known_tensor(node: ast.expr, ctx: Context) -> bool:
    """Whether ``node`` is known to be a ``torch.Tensor`` (not a tuple, a dict or a model
    output object, whose ``.detach()`` would raise)."""
    kind = ctx.kind(node)
    return bool(kind & TYPED) and not kind & CONTAINER


def advice(how: str, part: ast.expr, ctx: Context) -> str:
    """How to keep the value without its graph, in words that are valid for its type."""
    v = describe(part)
    if type(part) not in SIMPLE:
        v = f"({v})"
    if known_tensor(part, ctx):
        return _DETACH_FIX[how].format(v=v)
    return (f"keep detached copies of the tensors in {v} (.detach(), or .item() for "
            f"scalars)")
