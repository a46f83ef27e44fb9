"""Summaries specialised on the flag arguments of a call (no torch).

``iter_one_epoch(self, cross_valid=False)`` trains when the flag is false and runs its
forward passes under ``no_grad()`` when it is true; its caller calls it both ways
(``tr_loss = self.iter_one_epoch()``, ``cv_loss = self.iter_one_epoch(cross_valid=True)``).
Summarised once for both, the returned total carries a graph on one path only, so the join
of ``if cross_valid:`` says "no graph". Specialised on the flag, the summary of the training
call walks only the branch the flag takes, and its returned total is the loss it
differentiated.

A parameter counts as a flag when the function tests it bare (``if cross_valid:``, ``if not
cross_valid:``) or switches autograd with it (``with torch.set_grad_enabled(track_gradient):``)
and never rebinds it; its value at a call is the constant (``True``,
``False``, ``None``) passed for it, by position or keyword, or else its constant default.
The flags travel with the argument kinds of the summary (as ``"?name"`` entries, so that
each combination is summarised once) and only the walk of that summary prunes branches: the
function's own analysis, which reports findings, still walks every branch.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import body_fields, child_nodes

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["branches", "call_flags", "enter", "grad_switch", "leave"]

_SCRATCH_TESTED = "flags.tested"
_SCRATCH_ACTIVE = "flags.active"
_PREFIX = "?"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _flag_name(test: ast.expr) -> str | None:
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:  # type: ignore[attr-defined]
        test = test.operand  # type: ignore[attr-defined]
    return test.id if type(test) is ast.Name else None  # type: ignore[attr-defined]


_SET_GRAD = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})


def _grad_switch(expr: ast.expr, ctx: Context) -> str | None:
    """``name`` for ``torch.set_grad_enabled(name)``, else None."""
    if type(expr) is ast.Call and expr.args and type(expr.args[0]) is ast.Name and \
            ctx.qualname(expr.func) in _SET_GRAD:
        return expr.args[0].id
    return None


def grad_switch(expr: ast.expr, ctx: Context) -> bool | None:
    """The value of the flag in ``torch.set_grad_enabled(flag)`` in a summary specialised on
    that flag (``train_step(data)`` with ``track_gradient=True`` by default), else None."""
    name = _grad_switch(expr, ctx)
    active = ctx.scratch.get(_SCRATCH_ACTIVE) if name is not None else None
    flags = active.get(id(ctx.fn.node)) if active and ctx.fn is not None else None
    return flags.get(name) if flags else None


def _tested(node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> frozenset[str]:
    """The parameters ``node`` tests bare in an ``if`` and never rebinds (own scope),
    computed once per function."""
    memo = ctx.scratch.setdefault(_SCRATCH_TESTED, {})
    found = memo.get(id(node))
    if found is not None:
        return found  # type: ignore[no-any-return]
    args = node.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    tested: set[str] = set()
    # the ifs first, through the statements only (most functions test no parameter bare)
    todo: list[ast.AST] = list(node.body)
    while todo:
        sub = todo.pop()
        t = type(sub)
        if t in _FUNCS or t is ast.ClassDef:
            continue
        if t is ast.If:
            name = _flag_name(sub.test)  # type: ignore[attr-defined]
            if name in params:
                tested.add(name)  # type: ignore[arg-type]
        elif t is ast.With or t is ast.AsyncWith:
            for item in sub.items:  # type: ignore[attr-defined]
                name = _grad_switch(item.context_expr, ctx)
                if name in params:
                    tested.add(name)  # type: ignore[arg-type]
        for block in body_fields(t):
            todo.extend(getattr(sub, block))
    if tested:  # then every name the function's own scope binds
        todo = list(node.body)
        while todo and tested:
            sub = todo.pop()
            t = type(sub)
            if t is ast.Name and type(sub.ctx) is not ast.Load:  # type: ignore[attr-defined]
                tested.discard(sub.id)  # type: ignore[attr-defined]
            if t in _FUNCS or t is ast.ClassDef:
                continue
            todo.extend(child_nodes(sub))
    found = frozenset(tested)
    memo[id(node)] = found
    return found


def _constant(value: ast.expr | None) -> bool | None:
    """The truth of a ``True``/``False``/``None`` literal, else ``None`` (unknown)."""
    if type(value) is ast.Constant and (value.value is None or  # type: ignore[union-attr]
                                        type(value.value) is bool):  # type: ignore[union-attr]
        return bool(value.value)  # type: ignore[union-attr]
    return None


def call_flags(node: ast.FunctionDef | ast.AsyncFunctionDef, bound: bool, call: ast.Call,
               ctx: Context) -> dict[str, int]:
    """``{"?name": 1 or 2}`` (false, true) for each flag of ``node`` whose value at ``call``
    is known."""
    tested = _tested(node, ctx)
    if not tested:
        return {}
    args = node.args
    positional = args.posonlyargs + args.args
    if bound and positional:
        positional = positional[1:]
    values: dict[str, ast.expr | None] = {}
    defaults = args.defaults
    for a, d in zip(positional[len(positional) - len(defaults):], defaults):
        values[a.arg] = d
    for a, kd in zip(args.kwonlyargs, args.kw_defaults):
        values[a.arg] = kd
    if any(type(a) is ast.Starred for a in call.args) or any(
            kw.arg is None for kw in call.keywords):
        return {}  # *args or **kwargs: the values are not known
    for a, v in zip(positional, call.args):
        values[a.arg] = v
    for kw in call.keywords:
        values[kw.arg] = kw.value  # type: ignore[index]
    out: dict[str, int] = {}
    for name in tested:
        truth = _constant(values.get(name))
        if truth is not None:
            out[_PREFIX + name] = 2 if truth else 1
    return out


def enter(node: ast.AST, arg_kinds: dict[str, int] | None, ctx: Context) -> None:
    """Record the flags of the summary walk of ``node`` that starts now."""
    if arg_kinds:
        flags = {k[1:]: v == 2 for k, v in arg_kinds.items() if k.startswith(_PREFIX)}
        if flags:
            ctx.scratch.setdefault(_SCRATCH_ACTIVE, {})[id(node)] = flags


def leave(node: ast.AST, ctx: Context) -> None:
    """Forget the flags of the walk of ``node`` that ends now."""
    active = ctx.scratch.get(_SCRATCH_ACTIVE)
    if active:
        active.pop(id(node), None)


def branches(node: ast.If, ctx: Context) -> list[list[ast.stmt]]:
    """The bodies of ``node`` that can run: the one its flag takes in a specialised summary,
    both otherwise."""
    active = ctx.scratch.get(_SCRATCH_ACTIVE)
    flags = active.get(id(ctx.fn.node)) if active and ctx.fn is not None else None
    name = _flag_name(node.test) if flags else None
    if name is None or name not in flags:  # type: ignore[operator]
        return [node.body, node.orelse]
    truth = flags[name]  # type: ignore[index]
    if type(node.test) is ast.UnaryOp:
        truth = not truth
    return [node.body if truth else node.orelse]
