"""Whether a value stored on an object keeps an autograd graph (no torch).

Used by the summaries of methods that keep values on ``self``
(:mod:`torchmem.lint.summaries`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.kinds import GRAPH

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["keeps_graph"]

_NUMBER_CALLS = frozenset({"float", "int", "bool", "len", "str", "repr", "item", "tolist",
                           "numpy", "detach", "id", "hash", "round", "format", "isinstance"})


def keeps_graph(value: ast.expr, c: Context) -> bool:
    """Whether storing ``value`` keeps an autograd graph: it carries one, or it is the
    result of a call the linter cannot see into (``hvd.allreduce(val.cpu())``,
    ``all_gather(x)``) made on a graph-carrying tensor: such a call is taken to pass the
    graph through, unless its name says it returns a plain number (``float``, ``len``,
    ``.item()``, ``.tolist()``, ``.numpy()``: their kinds are known and not graph-carrying).
    """
    kind = c.kind(value)
    if kind & GRAPH:
        return True
    if kind or type(value) is not ast.Call:
        return False
    func = value.func  # type: ignore[attr-defined]
    name = func.attr if type(func) is ast.Attribute else (
        func.id if type(func) is ast.Name else "")
    qual = c.qualname(func) or ""
    if name in _NUMBER_CALLS or qual == "torch" or qual.startswith("torch."):
        return False  # a plain number, or a torch call whose kind is known
    args = list(value.args) + [kw.value for kw in value.keywords]  # type: ignore[attr-defined]
    return any(keeps_graph(a, c) for a in args)
