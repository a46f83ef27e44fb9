"""Statements that change the grad mode or a tensor's ``requires_grad`` (no torch).

Used by :class:`~torchmem.lint.walker.Walker`: ``with torch.no_grad():`` and friends
(:func:`grad_delta`), and statement-level calls such as ``torch.set_grad_enabled(False)``,
``stack.enter_context(torch.no_grad())``, ``h.detach_()``, ``w.requires_grad_()``
(:func:`effects`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint import flags
from torchmem.lint.facts import key_of
from torchmem.lint.kinds import GRAPH, LEAF, MODEL, TYPE, TYPED, VALUE
from torchmem.lint.knowledge import ENABLE_GRAD_CONTEXTS, NO_GRAD_CONTEXTS

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["effects", "requires_grad", "grad_delta"]


#: the methods whose statement-level calls :func:`effects` follows
_EFFECT_ATTRS = frozenset({"detach_", "requires_grad_", "eval", "enter_context",
                           "set_grad_enabled", "backward"})


def effects(ctx: Context, value: ast.expr) -> None:
    """Statement-level calls that change the flow: ``h.detach_()``, ``torch.set_grad_enabled``,
    ``loss.backward()`` (the name carries a graph, whatever made it)."""
    if type(value) is not ast.Call:
        return
    func = value.func
    if type(func) is ast.Attribute:
        attr = func.attr
        if attr not in _EFFECT_ATTRS:  # most calls: no receiver key built, no qualified name
            return
        key = key_of(func.value) if attr != "enter_context" else None
        if func.attr == "detach_" and key:
            ctx.fn.flow.env[key] = (ctx.fn.flow.env.get(key, 0) & TYPE) | 4
        elif func.attr == "requires_grad_" and key:
            requires_grad(ctx, func.value, value.args[0] if value.args else None)
        elif func.attr == "backward" and key and not value.args and \
                (ctx.fn.flow.env.get(key, 0) & (GRAPH | LEAF)) == 0:
            # loss.backward() raises unless loss carries a graph: from here on it does
            # (accelerator.backward(loss), with an argument, is a wrapper's method)
            ctx.fn.flow.env[key] = ctx.fn.flow.env.get(key, 0) | GRAPH | TYPED
        elif func.attr == "eval" and key and not value.args:
            ctx.fn.flow.env[key] = ctx.fn.flow.env.get(key, 0) | MODEL
        elif func.attr == "enter_context" and len(value.args) == 1 and \
                grad_delta(ctx, value.args[0]) > 0:
            # stack.enter_context(torch.no_grad()): until the ExitStack closes, which
            # is the end of its ``with`` block or of the function
            ctx.no_grad = max(ctx.no_grad, 1)
    qual = ctx.qualname(func)
    if qual == "torch.set_grad_enabled" or qual == "torch.autograd.set_grad_enabled":
        arg = value.args[0] if value.args else None
        enabled = isinstance(arg, ast.Constant) and arg.value is True
        ctx.no_grad = 0 if enabled else max(ctx.no_grad, 1)

def requires_grad(ctx: Context, target: ast.expr, value: ast.expr | None) -> None:
    """``x.requires_grad = flag`` / ``x.requires_grad_(flag)``: a leaf, or no longer one."""
    key = key_of(target)
    if key is None:
        return
    env = ctx.fn.flow.env
    on = value is None or (isinstance(value, ast.Constant) and value.value is True)
    off = isinstance(value, ast.Constant) and value.value is False
    old = env.get(key, 0)
    if on:
        # a tensor with history keeps it (requires_grad_() of a non-leaf that already
        # requires grad changes nothing); anything else becomes a leaf
        env[key] = old if old & 1 else (old & TYPE) | 2
    elif off:
        env[key] = (old & TYPE) | (4 if old & VALUE else 0)
    else:
        env[key] = old & TYPE


def grad_delta(ctx: Context, expr: ast.expr) -> int:
    """+1 for a context manager that disables autograd recording, -10000 for one that
    enables it, else 0. ``torch.set_grad_enabled(flag)`` counts as disabling unless a
    summary specialised on the flag knows it is true."""
    func = expr.func if type(expr) is ast.Call else expr
    qual = ctx.qualname(func)
    if qual in NO_GRAD_CONTEXTS:
        return 1
    if qual in ENABLE_GRAD_CONTEXTS:
        return -10_000
    if qual in ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled"):
        arg = expr.args[0] if type(expr) is ast.Call and expr.args else None
        if isinstance(arg, ast.Constant) and arg.value is True:
            return 0
        return 0 if flags.grad_switch(expr, ctx) else 1
    return 0
