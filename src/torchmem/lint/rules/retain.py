"""TMM104: ``retain_graph=True`` / ``create_graph=True`` in a loop with no second backward,
``retain_graph=True`` on the only backward of a training-step function that keeps the loss,
and ``backward(create_graph=True)``, whose gradients in ``.grad`` form a reference cycle.

Part of the TMM1xx family (autograd graphs kept alive, :mod:`torchmem.lint.rules.graph`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of
from torchmem.lint.registry import Rule, register

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["RetainGraphInLoop"]


@register
class RetainGraphInLoop(Rule):
    """``retain_graph=True`` in a loop with no second backward; ``backward(create_graph=True)``.

    What:
        Flags ``loss.backward(retain_graph=True)``, ``backward(create_graph=True)`` and
        ``torch.autograd.grad(..., retain_graph=True)`` inside a loop whose body runs no
        other ``backward()``/``grad()`` that could use the retained graph, when the loss is
        computed anew in the loop; ``retain_graph=True`` on the last of several
        backward calls of an iteration; and, outside any loop, ``retain_graph=True`` on
        the only backward of a function that steps an optimizer, or clears the gradients
        (an optimizer closure, ``optimizer.step(closure)``), and keeps the loss (returns it,
        stores it or appends it): a training step called once per step. Anywhere else,
        ``x.backward(create_graph=True)`` (``torch.autograd.backward(...,
        create_graph=True)``) whose function does not break the cycle afterwards (sets a
        ``.grad`` to ``None``, or calls ``zero_grad()`` and reads no ``.grad`` of an input
        it made a leaf): the gradients it accumulates into ``.grad`` carry a graph (a force
        or a gradient penalty read as ``r.grad``).

    Why:
        ``retain_graph=True`` keeps every activation saved for backward alive after the
        backward pass, for as long as the loss is referenced: the previous iteration's
        graph survives through the next forward pass (up to twice the activation memory),
        and if anything links iterations (a hidden state, an accumulated loss) the retained
        graphs pile up. A retained graph is only needed when a second backward pass goes
        through the same graph. ``create_graph=True`` on ``backward()`` is worse, even
        when the gradient is differentiated again: the gradient kept in ``.grad`` has a
        graph that references its own leaf, a reference cycle through autograd's nodes
        that Python's garbage collector cannot see, so the leaf, its gradient and that
        graph are never freed, one per call (PyTorch warns: "Using backward() with
        create_graph=True will create a reference cycle"). ``torch.autograd.grad(...,
        create_graph=True)`` returns the gradient without storing it; an optimizer's
        ``zero_grad()`` breaks the cycles of its parameters, not of an input made a leaf
        to read its gradient (``r.requires_grad_(True)``, then ``r.grad``).

    Known problems:
        A second backward through the same graph that happens in another function (or a
        later iteration on purpose) is not seen: a step function whose caller runs a second
        backward through the graph (a discriminator step whose caller then backpropagates
        the generator through the same samples) is reported. For ``create_graph=True``, a
        ``.grad`` reset or a ``zero_grad()`` in another function (the caller's next step)
        is not seen: the call is reported.

    Example:
        ```python
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward(retain_graph=True)
            optimizer.step()
        ```

    Use instead:
        ```python
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        ```
    """

    code = "TMM104"
    name = "retain-graph-in-loop"
    summary = ("retain_graph=True in a loop without a second backward; "
               "backward(create_graph=True) into .grad")

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not node.keywords:
            return
        if not ctx.loops:
            if not self._step_function(node, ctx):
                self._grad_cycle(node, ctx)
            return
        if not self._in_loop(node, ctx):
            self._grad_cycle(node, ctx)

    def _in_loop(self, node: ast.Call, ctx: Context) -> bool:
        """The checks of a call inside a loop; whether it reported."""
        func = node.func
        if type(func) is not ast.Attribute:
            if ctx.qualname(func) not in ("torch.autograd.grad", "torch.autograd.backward"):
                return False
        elif func.attr != "backward" and ctx.qualname(func) not in (
                "torch.autograd.grad", "torch.autograd.backward"):
            return False
        flag = None
        for kw in node.keywords:
            if kw.arg in ("retain_graph", "create_graph") and isinstance(
                    kw.value, ast.Constant) and kw.value.value is True:
                flag = kw
                break
        if flag is None:
            return False
        if flag.arg == "create_graph" and not (type(func) is ast.Attribute
                                               and func.attr == "backward"):
            return False  # grad(..., create_graph=True): a gradient penalty or a Hessian term is
            # differentiated again through the loss it is added to, which frees the graph
        loop = ctx.loops[-1]
        calls = loop.facts.backward + loop.facts.grad_calls
        last = max(calls, key=lambda c: (c.lineno, c.col_offset)) if calls else node
        if len(calls) > 1 and not (last is node and flag.arg == "retain_graph"):
            return False  # an earlier backward keeps the graph for a later one: needed
        if type(func) is ast.Attribute and func.attr == "backward":
            recv = key_of(func.value) or ""
            root: ast.AST = node.args[0] if (node.args and recv.rpartition(".")[2] in (
                "accelerator", "fabric", "scaler")) else func.value
        else:
            root = node.args[0] if node.args else node
        computed = {k for k, v in loop.facts.assigns if v is not None}
        if not any((type(s) is ast.Name or type(s) is ast.Attribute) and key_of(s) in computed
                   for s in ast.walk(root)) and not any(type(s) is ast.Call for s in ast.walk(root)):
            return False  # differentiating something computed before the loop, on purpose
        what = ("the last backward of the iteration" if len(calls) > 1 else
                "a loop whose body has no second backward through this graph")
        ctx.report(self, flag, (
            f"{flag.arg}=True in {what}: each iteration's saved activations stay alive "
            f"until the loss is replaced; drop {flag.arg}=True"))
        return True

    def _step_function(self, node: ast.Call, ctx: Context) -> bool:
        """``loss.backward(retain_graph=True)`` as the only backward of a function that
        steps an optimizer and keeps the loss (returns it, stores it, appends it): the
        function is one training step, called once per step by code out of sight; the
        optimizer step changes the parameters the graph saved, so no later backward can
        go through them, and the kept loss holds every saved activation until the caller
        drops it."""
        func = node.func
        fn = ctx.fn
        if fn.node is ctx.tree or ctx.no_grad or type(func) is not ast.Attribute or \
                func.attr != "backward" or type(func.value) is not ast.Name:
            return False
        flag = next((kw for kw in node.keywords if kw.arg == "retain_graph" and isinstance(
            kw.value, ast.Constant) and kw.value.value is True), None)
        facts = fn.facts
        if flag is None or not (facts.has_step or facts.has_zero_grad) or facts.grad_calls or \
                facts.backward_calls != [node] or func.value.id not in facts.escapes:
            return False
        ctx.report(self, flag, (
            f"retain_graph=True on the only backward() of {fn.name}(), which "
            f"{'steps the optimizer' if facts.has_step else 'clears the gradients (an optimizer closure, run once per step)'} "
            f"and keeps '{func.value.id}': no second backward follows, and the "
            f"kept loss holds the step's saved activations until the caller drops it; "
            f"drop retain_graph=True"))
        return True

    def _grad_cycle(self, node: ast.Call, ctx: Context) -> None:
        """``x.backward(create_graph=True)`` (``torch.autograd.backward(...,
        create_graph=True)``): the gradients accumulated into ``.grad`` carry a graph that
        references their own leaf (through its ``AccumulateGrad`` node), a cycle through
        autograd's C++ nodes that Python's collector cannot see, so each call leaks its
        graph and leaves (PyTorch warns at run time). ``torch.autograd.grad(...,
        create_graph=True)`` returns the gradient instead; the cycle is also broken when
        the function resets the gradients after the call, the remedy PyTorch's warning
        names (see :func:`_grad_reset_after`)."""
        func = node.func
        if type(func) is ast.Attribute and func.attr == "backward":
            pass
        elif ctx.qualname(func) != "torch.autograd.backward":
            return
        flag = next((kw for kw in node.keywords if kw.arg == "create_graph" and isinstance(
            kw.value, ast.Constant) and kw.value.value is True), None)
        if flag is None or _grad_reset_after(ctx.fn.node, node.lineno):
            return
        ctx.report(self, flag, (
            "backward(create_graph=True) accumulates gradients that carry their own graph "
            "into .grad: each leaf and its gradient's graph form a reference cycle through "
            "autograd's nodes that is never freed, so every call leaks its graph (PyTorch "
            "warns about it); compute the gradient with torch.autograd.grad(..., "
            "create_graph=True), or set the .grad fields to None after use"))


def _grad_reset_after(fn: ast.AST, line: int) -> bool:
    """Whether ``fn`` breaks the cycles after ``line``: it sets a ``.grad`` to ``None``
    (``x.grad = None``), or clears an optimizer's or a module's gradients (``zero_grad()``
    sets them to ``None``, or detaches them before zeroing) while no input it made a leaf
    itself (``r.requires_grad_(True)``, ``x.requires_grad = True``) has its ``.grad`` read:
    ``zero_grad()`` never reaches such an input's gradient."""
    cleared = False
    leaves: set[str] = set()
    read: set[str] = set()
    for sub in ast.walk(fn):
        t = type(sub)
        if t is ast.Attribute and sub.attr == "grad" and type(sub.value) is ast.Name and \
                type(sub.ctx) is ast.Load:
            read.add(sub.value.id)
        elif t is ast.Call and type(sub.func) is ast.Attribute:
            attr = sub.func.attr
            if attr == "requires_grad_" and type(sub.func.value) is ast.Name:
                leaves.add(sub.func.value.id)
            elif attr == "zero_grad" and sub.lineno > line:
                cleared = True
        elif t is ast.Assign:
            for target in sub.targets:
                if type(target) is not ast.Attribute:
                    continue
                if target.attr == "grad" and type(sub.value) is ast.Constant and \
                        sub.value.value is None and sub.lineno > line:
                    return True
                if target.attr == "requires_grad" and type(target.value) is ast.Name:
                    leaves.add(target.value.id)
    return cleared and not (leaves & read)
