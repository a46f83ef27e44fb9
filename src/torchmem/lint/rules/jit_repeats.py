"""TMM114: TorchScript tracing or scripting on every pass of a loop.

Part of the TMM1xx family (memory kept alive longer than needed). ``torch.jit.trace`` and
``torch.jit.script`` compile into TorchScript's process-wide compilation unit, which keeps
every compiled function, its graph and its constants for the life of the process; the
graph executor also caches optimised plans per input shape. Code that traces on every
step, per batch or per request grows by one compiled model each time, in memory that no
Python object holds (``gc`` and tensor counts see nothing). Read from the file alone (no
torch), with :func:`torchmem.lint.repeats.repeated`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.registry import Rule, register
from torchmem.lint.repeats import repeated, time_loop

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["JitCompileInLoop"]

_COMPILE = frozenset({"torch.jit.trace", "torch.jit.trace_module", "torch.jit.script"})


def _guard(test: ast.expr) -> bool:
    """Whether an ``if`` test checks for a missing value: ``x is None``, ``not x``,
    ``key not in cache``, ``not hasattr(...)``."""
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        return True
    if type(test) is ast.Compare and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        return type(op) is ast.NotIn or type(op) is ast.Is and \
            type(right) is ast.Constant and right.value is None
    if type(test) is ast.BoolOp:
        return any(_guard(v) for v in test.values)
    return False


def _lazy(node: ast.Call, ctx: Context) -> bool:
    """Whether ``node`` sits under an ``if`` that checks for a missing value (``if
    self._traced is None:``, ``if shape not in cache:``): compiled once, then reused."""
    scope = ctx.fn.node if ctx.fn is not None else None
    for stmt in ast.walk(scope) if scope is not None else ():
        if type(stmt) is ast.If and _guard(stmt.test) and any(
                sub is node for part in stmt.body for sub in ast.walk(part)):
            return True
    return False


@register
class JitCompileInLoop(Rule):
    """``torch.jit.trace``/``script`` called again on every pass of a loop.

    What:
        Flags ``torch.jit.trace(...)``, ``torch.jit.trace_module(...)`` and
        ``torch.jit.script(...)`` inside a loop over steps or data (``range(n)``,
        ``while``, a loader, ``images``), or in a function of the file that such a loop
        calls (directly or through other functions and constructors of the file).

    Why:
        Each call compiles a new TorchScript function into the process-wide compilation
        unit, which keeps it (graph, constants, the executor's plans per input shape)
        until the process exits, even after the traced module is dropped. Tracing per
        step or per request grows the process by a compiled model each time, in memory
        that neither ``gc`` nor a tensor census can see.

    Known problems:
        A compilation under an ``if`` that checks for a missing value (``if self._traced is
        None:``, ``if shape not in cache:``) is taken as compiled once and reused. A loop
        over a few settings (a named list of models to export) is not a loop over
        time and stays silent; a ``range()`` over a handful of export variants is
        reported.

    Example:
        ```python
        import torch

        def check(net, example):
            traced = torch.jit.trace(net, example)
            return traced(example)

        def train(net, example, steps):
            for step in range(steps):
                check(net, example)
        ```

    Use instead:
        ```python
        import torch

        def train(net, example, steps):
            for step in range(steps):
                net(example)
            traced = torch.jit.trace(net, example)
            return traced(example)
        ```
    """

    code = "TMM114"
    name = "jit-compile-in-loop"
    summary = "torch.jit.trace/script called on every pass of a loop over steps or data"
    call_tails = frozenset(q.rpartition(".")[2] for q in _COMPILE)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qual = ctx.qualname(node.func)
        if qual not in _COMPILE:
            return
        where = None
        for loop in reversed(ctx.loops):
            if time_loop(loop.node):
                where = f"on every pass of the loop at line {loop.node.lineno}"
                break
        fn = ctx.fn.node if ctx.fn is not None else None
        if where is None and fn is not None:
            line = repeated(ctx, over_time=True).get(id(fn))
            if line is not None:
                where = f"each time '{ctx.fn.name}' runs (a loop at line {line} calls it)"  # type: ignore[union-attr]
        if where is None or _lazy(node, ctx):
            return
        ctx.report(self, node, (
            f"{qual}() compiles {where}: TorchScript keeps every compiled function, its "
            f"graph and constants in its process-wide compilation unit, so memory grows by "
            f"one compiled model each time (invisible to gc and to tensor counts); compile "
            f"once outside the loop and reuse the result"))
