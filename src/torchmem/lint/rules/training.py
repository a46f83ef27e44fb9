"""TMM5xx: training-loop correctness (not memory, but found by the same analysis).

The same loop analysis that finds memory problems finds training loops whose updates are
wrong. These findings are correctness bugs and are reported as such, not as leaks.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import all_statements
from torchmem.lint.facts import key_of
from torchmem.lint.registry import Rule, register

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, LoopState

__all__ = ["MissingZeroGrad"]


def _own_steppers(ctx: Context) -> frozenset[str]:
    """Names the file binds to an instance of a class of the file that does not derive
    from an ``*Optimizer`` class (an EMA helper with a ``step()``); once per file."""
    memo = ctx.scratch.get("TMM501.own_steppers")
    if memo is None:
        tree = ctx.tree
        statements = all_statements(tree) if tree is not None else []
        plain = {c.name for c in statements if type(c) is ast.ClassDef and not any(
            "Optim" in (key_of(b) or "") for b in c.bases)}  # type: ignore[attr-defined]
        memo = ctx.scratch["TMM501.own_steppers"] = frozenset(
            k for node in statements if type(node) is ast.Assign and
            type(node.value) is ast.Call and type(node.value.func) is ast.Name and  # type: ignore[attr-defined]
            node.value.func.id in plain  # type: ignore[attr-defined]
            for k in (key_of(t) for t in node.targets) if k)  # type: ignore[attr-defined]
    return memo  # type: ignore[no-any-return]


@register
class MissingZeroGrad(Rule):
    """A training loop calls ``backward()`` and ``optimizer.step()`` but never clears gradients.

    What:
        Flags a loop whose body calls ``backward()`` and an optimizer's ``step()`` (or
        updates parameters by hand from ``p.grad``) but never ``zero_grad()`` (on the
        optimizer or the model), nor sets ``p.grad = None`` or ``p.grad.zero_()``. The
        finding points at the ``step()`` call, or at ``backward()`` for a hand-written
        update. Also flags a loop that steps several optimizers and calls ``zero_grad()``
        on some of them only, with no other clearing in the loop (``model.zero_grad()``,
        ``p.grad = None``): at the ``step()`` of the optimizer never cleared.

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
        if not facts.backward or not facts.step:
            return
        if facts.zero_grad:
            self._uncleared_optimizer(loop, ctx)
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

    def _uncleared_optimizer(self, loop: LoopState, ctx: Context) -> None:
        """A loop that steps several optimizers and clears some of them only
        (``optimizer_E.zero_grad()`` but never ``optimizer_D.zero_grad()``), with no other
        way of clearing in the loop (a module's ``zero_grad()``, ``p.grad = None``)."""
        steps = {}
        for call in loop.facts.step_calls:
            if call.args or call.keywords:
                return  # step(closure), scaler.step(optimizer): not read
            key = key_of(getattr(call.func, "value", None)) if type(call.func) is ast.Attribute \
                else None
            if key is None:
                return
            steps.setdefault(key, call)
        cleared = set()
        for node in ast.walk(loop.node):
            if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                    node.func.attr in ("zero_grad", "zero_", "detach_"):
                if node.func.attr != "zero_grad":
                    return  # p.grad.zero_(): clearing by hand
                cleared.add(key_of(node.func.value))
            elif type(node) is ast.Assign and any(
                    type(t) is ast.Attribute and t.attr == "grad" for t in node.targets):
                return  # p.grad = None
        if not cleared or not cleared <= set(steps):
            return  # a module's zero_grad() may clear every optimizer's parameters
        missing = [(key, call) for key, call in steps.items() if key not in cleared]
        if missing:  # ema_optimizer = WeightEMA(...): a class of the file, no gradients
            own = _own_steppers(ctx)
            missing = [(key, call) for key, call in missing if key not in own]
        if not missing:
            return
        key, call = missing[0]
        others = ", ".join(sorted(f"{k}.zero_grad()" for k in cleared))
        ctx.report(self, call, (
            f"the loop steps '{key}' but clears only other optimizers ({others}): the "
            f"gradients of '{key}''s parameters add up across iterations, so each of its "
            f"steps after the first uses the wrong gradient; call {key}.zero_grad("
            f"set_to_none=True) once per step"))
