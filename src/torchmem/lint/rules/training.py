"""TMM5xx: training-loop correctness (not memory, but found by the same analysis).

The same loop analysis that finds memory problems finds training loops whose updates are
wrong. These findings are correctness bugs and are reported as such, not as leaks.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of
from torchmem.lint.registry import Rule, register

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, LoopState

__all__ = ["MissingZeroGrad"]


@register
class MissingZeroGrad(Rule):
    """A training loop calls ``backward()`` and ``optimizer.step()`` but never clears gradients.

    What:
        Flags a loop whose body calls ``backward()`` and an optimizer's ``step()`` (or
        updates parameters by hand from ``p.grad``) but never ``zero_grad()`` (on the
        optimizer or the model), nor sets ``p.grad = None`` or ``p.grad.zero_()``. The
        finding points at the ``step()`` call, or at ``backward()`` for a hand-written
        update.

    Why:
        ``backward()`` adds into ``.grad``. Without clearing, each step uses the sum of
        all gradients so far: the updates are wrong and training diverges or stalls. This
        is a correctness bug, not a leak: gradients are accumulated in place, so memory
        stays flat (contrary to a widespread claim).

    Known problems:
        Gradients cleared inside a helper called from the loop are not seen; the rule
        stays silent when ``step()`` receives a closure (LBFGS style), whose body usually
        clears them, and when the optimizer is created anew inside the loop.

    Example:
        ```python
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        ```

    Use instead:
        ```python
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        ```
    """

    code = "TMM501"
    category = "correctness"
    name = "missing-zero-grad"
    summary = "training loop with backward() and step() but no zero_grad()"

    def leave_loop(self, loop: LoopState, ctx: Context) -> None:
        facts = loop.facts
        if not facts.backward or not facts.step or facts.zero_grad:
            return
        if any(call.args or call.keywords for call in facts.step_calls
               if not (getattr(call.func, "attr", "") == "step"
                       and getattr(getattr(call.func, "value", None), "id", "") == "scaler")):
            return  # optimizer.step(closure)
        for step in facts.step_calls:
            recv = getattr(step.func, "value", None)
            key = key_of(recv) if recv is not None else None
            if key and facts.resets(key):
                return  # a new optimizer every iteration starts from fresh gradients
        done: set[int] = ctx.scratch.setdefault(self.code, set())
        if id(loop.node) in done:
            return
        # report the innermost such loop only
        parent = facts.parent
        while parent is not None:
            done.add(id(parent.node))
            parent = parent.parent
        call: ast.AST = facts.step_calls[0] if facts.step_calls else facts.backward[0]
        ctx.report(self, call, (
            "the loop calls backward() and step() but never zero_grad(): gradients add up "
            "across iterations, so every step after the first uses the wrong gradient; call "
            "optimizer.zero_grad(set_to_none=True) once per step"))
