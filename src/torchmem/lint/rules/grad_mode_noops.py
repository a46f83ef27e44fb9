"""TMM116, TMM117: requests to stop recording autograd graphs that do nothing.

Part of the TMM1xx family (memory kept alive longer than needed). Evaluation code that
means to run without autograd, and does not, records a graph and saves activations at
every forward: with a collection of outputs or a carried state the graphs are kept, and
the memory grows with the number of batches. Two ways of asking that torch ignores, both
read from the file alone (no torch):

* ``Variable(x, volatile=True)``: ``volatile`` was removed in PyTorch 0.4 and has no
  effect (torch only warns once); graphs are recorded as if it were not there.
* ``with torch.no_grad() and autocast():``: the ``and`` expression's value is its last
  operand (the first one is a true value), so only ``autocast()`` is entered and
  ``no_grad()`` is made and thrown away.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.registry import Rule, register

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["VolatileHasNoEffect", "BooleanWithItem"]

_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable",
                       "torch.Variable"})


@register
class VolatileHasNoEffect(Rule):
    """``Variable(x, volatile=True)``: ignored since PyTorch 0.4.

    What:
        Flags ``Variable(...)`` (``torch.autograd.Variable``) called with ``volatile=`` set
        to anything but ``False``.

    Why:
        ``volatile=True`` used to stop autograd from recording a graph for evaluation. It
        was removed in PyTorch 0.4: the keyword is accepted and ignored (torch warns once),
        so every forward on such an input records a graph and saves its activations. In an
        evaluation loop that keeps outputs or carries a state, the memory grows with the
        number of batches; otherwise each batch still pays for a graph it never uses.

    Known problems:
        Whether the code runs under ``torch.no_grad()`` anyway (a caller's context) is
        not checked: there the keyword is only dead code.

    Example:
        ```python
        import torch
        from torch.autograd import Variable

        def evaluate(model, loader):
            outputs = []
            for x, _ in loader:
                outputs.append(model(Variable(x, volatile=True)))
            return torch.cat(outputs)
        ```

    Use instead:
        ```python
        import torch

        def evaluate(model, loader):
            outputs = []
            with torch.no_grad():
                for x, _ in loader:
                    outputs.append(model(x))
            return torch.cat(outputs)
        ```
    """

    code = "TMM116"
    name = "volatile-has-no-effect"
    summary = "Variable(..., volatile=True) is ignored since PyTorch 0.4: graphs are recorded"
    call_tails = frozenset({"Variable"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        volatile = next((k for k in node.keywords if k.arg == "volatile"), None)
        if volatile is None or (type(volatile.value) is ast.Constant and volatile.value.value is False):
            return
        func = node.func
        if ctx.qualname(func) not in _VARIABLE and not (type(func) is ast.Name and func.id == "Variable"):
            return
        ctx.report(self, volatile.value, (
            "volatile= has had no effect since PyTorch 0.4: autograd records a graph and saves "
            "activations for every forward on this input as if it were not there; run the "
            "evaluation under torch.no_grad() (or torch.inference_mode()) and drop the Variable"))


@register
class BooleanWithItem(Rule):
    """``with a() and b():`` enters only one of the two context managers.

    What:
        Flags a ``with`` item whose expression is ``X and Y`` (or ``X or Y``) of calls,
        as in ``with torch.no_grad() and torch.cuda.amp.autocast():``.

    Why:
        ``X and Y`` is one value: ``Y`` when ``X`` is true (a context manager object is),
        so ``with`` enters ``Y`` only, and ``X`` is made and thrown away. With
        ``torch.no_grad()`` as ``X``, autograd keeps recording graphs: evaluation saves
        activations at every forward, and a state carried from one step to the next (a
        video model's memory) chains every step's graph onto the next, growing without
        bound. Two context managers are entered with a comma.

    Known problems:
        None seen: an ``and``/``or`` of calls is never what a ``with`` means. A
        conditional expression (``a() if amp else nullcontext()``) is left alone.

    Example:
        ```python
        import torch

        def track(model, frames):
            with torch.no_grad() and torch.autocast("cpu"):
                state = None
                for frame in frames:
                    state = model(frame, state)
            return state
        ```

    Use instead:
        ```python
        import torch

        def track(model, frames):
            with torch.no_grad(), torch.autocast("cpu"):
                state = None
                for frame in frames:
                    state = model(frame, state)
            return state
        ```
    """

    code = "TMM117"
    name = "boolean-with-item"
    summary = "with a() and b(): enters only one context manager (no_grad() is thrown away)"

    def _items(self, node: ast.With | ast.AsyncWith, ctx: Context) -> None:
        for item in node.items:
            expr = item.context_expr
            if type(expr) is not ast.BoolOp or not all(type(v) is ast.Call for v in expr.values):
                continue
            word = "and" if type(expr.op) is ast.And else "or"
            parts = [ast.unparse(v) for v in expr.values]
            kept = parts[-1] if word == "and" else parts[0]
            ctx.report(self, expr, (
                f"'with {f' {word} '.join(parts)}:' enters only {kept} (the value of the "
                f"'{word}' expression); the others are made and thrown away: write "
                f"'with {', '.join(parts)}:' to enter each"))

    def visit_With(self, node: ast.With, ctx: Context) -> None:
        self._items(node, ctx)

    def visit_AsyncWith(self, node: ast.AsyncWith, ctx: Context) -> None:
        self._items(node, ctx)
