"""One bug, one finding for TMM103 (no torch).

A helper of the file that runs forward passes outside ``no_grad`` can be reported twice:
inside, where its own loop runs the model (it is evaluation code by its name or by its
callers), and at each call made after ``model.eval()`` (``run_benchmark(model)``,
``greedy_decode(model, src)``). Both findings describe the same missing ``no_grad``. The one
kept is the helper's: ``@torch.no_grad()`` on it, or ``no_grad`` around its loop, fixes
every call at once. The call sites it covers are named in its message.

A call site is covered when its callee has a finding of its own, or when the callee runs no
forward pass of a module of its own (nothing named like a model) and calls, in the file, a
function that is covered (``_report()`` only calls ``_print_batches()``, which is reported).
Calls to helpers of other files keep their finding: the helper's file is linted on its own.

At the end of the module (:func:`settle`) the covered call-site findings are dropped.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import TYPE_CHECKING

from torchmem.lint.callers import file_functions
from torchmem.lint.rules._eval_shapes import has_weights

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context
    from torchmem.lint.violation import Violation

__all__ = ["found_in", "note_call_site", "note_finding", "settle"]

#: scratch key: id of a function node -> the TMM103 findings inside it
_FOUND = "TMM103.found"
#: scratch key: [(finding at a call site, the callee's node)]
_SITES = "TMM103.sites"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def note_finding(ctx: Context) -> None:
    """Record the finding just reported (the last violation) as one of the current
    function's."""
    ctx.scratch.setdefault(_FOUND, {}).setdefault(id(ctx.fn.node), []).append(
        len(ctx.violations) - 1)


def found_in(ctx: Context) -> dict[int, list[int]]:
    """Function id -> the TMM103 findings reported inside it so far."""
    return ctx.scratch.get(_FOUND, {})


def note_call_site(ctx: Context, callee: ast.AST | None) -> None:
    """Record the finding just reported as made at a call of ``callee`` (a function of
    this file, or of another one; ``None`` when unresolved)."""
    note_finding(ctx)
    if callee is not None:
        ctx.scratch.setdefault(_SITES, []).append((len(ctx.violations) - 1, callee))


def _own_calls(fn: ast.AST) -> list[ast.Call]:
    """The calls in ``fn``'s body, nested functions and classes aside."""
    out: list[ast.Call] = []
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (*_FUNCS, ast.Lambda, ast.ClassDef)):
            continue
        if type(node) is ast.Call:
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _covered(fn: ast.AST, found: dict[int, list[int]],
             defs: dict[tuple[str | None, str], list[ast.AST]], memo: dict[int, bool]) -> bool:
    """Whether a finding inside ``fn``, or inside a function of the file it calls while
    running no model itself, covers the calls of ``fn``."""
    key = id(fn)
    if key in memo:
        return memo[key]
    memo[key] = False  # recursion: not covered through itself
    if key in found:
        memo[key] = True
        return True
    if not isinstance(fn, _FUNCS):
        return False
    calls = _own_calls(fn)
    if any(has_weights(c, fn, methods=True) for c in calls):
        return False  # runs a model itself: its call sites stay
    for call in calls:
        func = call.func
        if type(func) is ast.Name:
            targets = defs.get((None, func.id), ())
        elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                func.value.id == "self":
            targets = defs.get(("self", func.attr), ())
        else:
            continue
        if any(_covered(t, found, defs, memo) for t in targets):
            memo[key] = True
            return True
    return False


def settle(ctx: Context) -> None:
    """Drop the call-site findings whose callee is covered (call at the module's end)."""
    sites = ctx.scratch.pop(_SITES, None)
    found: dict[int, list[int]] = ctx.scratch.get(_FOUND, {})
    if not sites or ctx.tree is None:
        return
    defs = file_functions(ctx.tree)
    memo: dict[int, bool] = {}

    dropped: dict[int, list[int]] = {}  # callee id -> lines of its dropped call sites
    for index, callee in sites:
        if _covered(callee, found, defs, memo):
            dropped.setdefault(id(callee), []).append(ctx.violations[index].line)
    if not dropped:
        return
    gone = {index for index, callee in sites if id(callee) in dropped}
    for key, lines in dropped.items():
        for index in found.get(key, ()):
            if index in gone:
                continue
            v: Violation = ctx.violations[index]
            where = ", ".join(str(n) for n in sorted(set(lines)))
            ctx.violations[index] = dataclasses.replace(v, message=(
                f"{v.message} (this covers its call{'s' if len(set(lines)) > 1 else ''} "
                f"after .eval() at line{'s' if len(set(lines)) > 1 else ''} {where})"))
    ctx.violations[:] = [v for i, v in enumerate(ctx.violations) if i not in gone]
