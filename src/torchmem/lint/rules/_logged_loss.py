"""A loss returned for backward together with a logging dict that holds it (no torch).

``return loss, sample_size, logging_output`` with ``logging_output = {"loss": loss, ...}``,
``return loss, metrics`` with ``metrics["nll_loss"] = nll_loss.cpu().mean()`` where
``loss = losses.mean() + nll_loss``: the function hands its caller the loss to
differentiate (the first element of the returned tuple) and, beside it, a dictionary of
values to log, one of which is the loss itself with its graph, or a term the loss was
summed from while the dictionary's other entries are detached (the function itself
treats the dictionary as numbers to log; a term kept with its graph where no entry is
detached may be there for the caller to weight and differentiate). Whoever keeps the
logged values (a trainer's list of logging outputs between two log steps, a metrics store
averaged at each log step) keeps each step's graph with them, although the copy in the
dictionary is only read as a number. Values detached on one branch (``loss if tpu else
loss.data``) are a choice, not a slip, and are left alone.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import GRAPH

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["logged_loss"]

_DETACHING = frozenset({"detach", "item", "data", "tolist", "numpy", "detach_"})
_DETACHING_CALLS = frozenset({"float", "int", "bool", "str"})


def _detached(node: ast.AST) -> bool:
    """Whether an expression detaches or converts somewhere (``.detach()``, ``.item()``,
    ``.data``, ``float(...)``); for ``a if c else b``, whether either branch does."""
    for sub in ast.walk(node):
        t = type(sub)
        if t is ast.Attribute and sub.attr in _DETACHING:  # type: ignore[attr-defined]
            return True
        if t is ast.Call and type(sub.func) is ast.Name and \
                sub.func.id in _DETACHING_CALLS:  # type: ignore[attr-defined]
            return True
    return False


def _last_value(fn: ast.AST, name: str, before: int) -> ast.expr | None:
    """The value last assigned to ``name`` (a plain ``name = value``) before line ``before``."""
    best: ast.Assign | None = None
    for sub in ast.walk(fn):
        if type(sub) is ast.Assign and sub.lineno < before and any(
                type(t) is ast.Name and t.id == name
                for t in sub.targets):  # type: ignore[attr-defined]
            if best is None or sub.lineno > best.lineno:
                best = sub
    return best.value if best is not None else None


def _entries(fn: ast.AST, name: str, before: int) -> list[ast.expr]:
    """Values put in the dictionary ``name`` before line ``before``: those of a dict
    literal bound to it and of ``name[key] = value`` statements."""
    out: list[ast.expr] = []
    for sub in ast.walk(fn):
        if type(sub) is not ast.Assign or sub.lineno >= before or len(sub.targets) != 1:
            continue
        target = sub.targets[0]
        if type(target) is ast.Name and target.id == name and type(sub.value) is ast.Dict:
            out.extend(v for v in sub.value.values if v is not None)
        elif type(target) is ast.Subscript and type(target.value) is ast.Name and \
                target.value.id == name:
            out.append(sub.value)
    return out


def _dict_bound(fn: ast.AST, name: str, before: int) -> bool:
    """Whether ``name`` was last bound to a dictionary display (``{...}``, ``dict(...)``)."""
    value = _last_value(fn, name, before)
    return type(value) is ast.Dict or type(value) is ast.Call and \
        type(value.func) is ast.Name and value.func.id == "dict"  # type: ignore[attr-defined]


def _graph_loss(name: ast.Name, fn: ast.AST, before: int, ctx: Context) -> bool:
    """Whether the returned ``name`` carries a graph: by its data-flow kind, or bound to a
    call of a function out of sight given graph-carrying tensors
    (``modules.cross_entropy(logits.view(-1, v), targets)`` after ``logits = model(...)``)."""
    if ctx.kind(name) & GRAPH:
        return True
    value = _last_value(fn, name.id, before)
    if type(value) is not ast.Call or ctx.kind(value) & ~GRAPH:
        return False
    args = list(value.args) + [kw.value for kw in value.keywords]  # type: ignore[attr-defined]
    return any(ctx.kind(a) & GRAPH for a in args)


def logged_loss(node: ast.Return, ctx: Context) -> list[tuple[ast.expr, str, str]]:
    """``(value, loss, dictionary)`` for each graph-carrying copy of the returned loss (the
    first element of the returned tuple) kept in a dictionary returned beside it."""
    value = node.value
    if type(value) is not ast.Tuple or ctx.no_grad or \
            len(value.elts) < 2:  # type: ignore[attr-defined]
        return []
    first = value.elts[0]  # type: ignore[attr-defined]
    fn = ctx.fn.node
    line = node.lineno
    if type(first) is not ast.Name or not _graph_loss(first, fn, line, ctx):
        return []
    loss = first.id
    terms = {loss}
    source = _last_value(fn, loss, line)
    if type(source) is ast.BinOp:
        terms |= {s.id for s in ast.walk(source) if type(s) is ast.Name and ctx.kind(s) & GRAPH}
    found: list[tuple[ast.expr, str, str]] = []
    for d in value.elts[1:]:  # type: ignore[attr-defined]
        if type(d) is not ast.Name or d.id in terms or not _dict_bound(fn, d.id, line):
            continue
        entries = _entries(fn, d.id, line)
        logging = any(_detached(v) for v in entries)
        for v in entries:
            if _detached(v):
                continue
            if type(v) is ast.Name and v.id == loss:
                found.append((v, loss, d.id))  # the returned loss itself, a second time
            elif logging and ctx.kind(v) & GRAPH and any(
                    type(s) is ast.Name and s.id in terms for s in ast.walk(v)):
                found.append((v, loss, d.id))  # a term of it, beside detached entries
    return found
