"""The methods of an ``nn.Module`` class that run on every forward pass (no torch).

``forward()`` itself and the methods of the same class that it calls through ``self``,
transitively (``self.get_attention(q, k, v)`` calling ``self.einsum_op(q, k, v)``). Code
there runs once per forward pass: in every step of whatever loop drives the model, in
files the linter never sees.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["on_forward_path"]

_SCRATCH = "forward_path"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _self_calls(fn: ast.AST) -> set[str]:
    """Names of the methods ``fn`` calls as ``self.name(...)`` (nested functions aside)."""
    out: set[str] = set()
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if type(node) is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            if type(func) is ast.Attribute and type(func.value) is ast.Name and \
                    func.value.id == "self":
                out.add(func.attr)
        if not isinstance(node, (*_FUNCS, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _reachable(cls: ast.ClassDef) -> frozenset[str]:
    methods = {s.name: s for s in cls.body if isinstance(s, _FUNCS)}
    if "forward" not in methods:
        return frozenset()
    seen = {"forward"}
    todo = ["forward"]
    while todo:
        for name in _self_calls(methods[todo.pop()]):
            if name in methods and name not in seen:
                seen.add(name)
                todo.append(name)
    return frozenset(seen)


def on_forward_path(ctx: Context) -> bool:
    """Whether the current function is ``forward()`` of an ``nn.Module`` class of this file,
    or a method of that class that ``forward()`` calls (directly or not)."""
    fn = ctx.fn
    summaries = ctx.summaries
    if fn is None or fn.class_name is None or not ctx.in_module_class or summaries is None:
        return False
    cls = summaries.classes.get(fn.class_name)
    if cls is None:
        return False
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    names = memo.get(id(cls))
    if names is None:
        names = memo[id(cls)] = _reachable(cls)
    return fn.name in names and any(s is fn.node for s in cls.body)
