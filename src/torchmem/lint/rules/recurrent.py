"""TMM102: a recurrent hidden state fed back across iterations without ``detach()``.

Part of the TMM1xx family (autograd graphs kept alive).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of, target_keys
from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._common import describe, is_forward_function

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, LoopState

__all__ = ["HiddenStateCarried"]


@register
class HiddenStateCarried(Rule):
    """A recurrent hidden state fed back into the model across iterations without ``detach()``.

    What:
        Flags ``out, hidden = rnn(x, hidden)`` (and ``(h, c)`` tuples) in a loop that runs
        with autograd recording on, when ``rnn`` is a module (by type or by name) and
        ``hidden`` comes from the previous iteration and is not detached (or
        re-initialised) anywhere in the iteration, or by an enclosing loop. Outside training
        and data loops, only inference over a stream is checked (a function without
        ``backward()``, not a method, not a loop over ``range``): unrolling a cell over the
        time steps of one sequence, or a model passing a cache between chunks of one input,
        is the computation itself.

    Why:
        The new hidden state is computed from the old one, so its graph links back to the
        previous iteration, and to the one before: memory grows with every batch, and
        ``backward()`` either runs through all previous batches or fails with "Trying to
        backward through the graph a second time". Truncated back-propagation through time
        means cutting that link once per batch.

    Known problems:
        A hidden state kept in an attribute (``self.hidden``) inside ``forward()`` is not
        followed into the training loop that calls it. Any re-binding of the hidden state
        before the call (``hidden = repackage_hidden(hidden)``) counts as a detach.

    Example:
        ```python
        hidden = None
        for x, y in loader:
            out, hidden = lstm(x, hidden)
            loss = criterion(out, y)
            loss.backward()
        ```

    Use instead:
        ```python
        hidden = None
        for x, y in loader:
            if hidden is not None:
                hidden = tuple(h.detach() for h in hidden)
            out, hidden = lstm(x, hidden)
            loss = criterion(out, y)
            loss.backward()
        ```
    """

    code = "TMM102"
    name = "hidden-state-carried"
    summary = "recurrent hidden state fed back across iterations without detach()"

    def enter_loop(self, loop: LoopState, ctx: Context) -> None:
        bound: dict[int, set[str]] = ctx.scratch.setdefault(self.code, {})
        keys: set[str] = set()
        target = getattr(loop.node, "target", None)
        if target is not None:
            keys.update(target_keys(target))
        bound[id(loop.node)] = keys

    def _bound(self, keys: list[str], ctx: Context) -> None:
        bound = ctx.scratch.get(self.code)
        if bound and ctx.loops:
            mine = bound.get(id(ctx.loops[-1].node))
            if mine is not None:
                mine.update(keys)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        if ctx.loops:
            self._bound(list(target_keys(node.target)), ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> None:
        value = node.value
        if ctx.loops and type(value) is ast.Call and type(value.func) is ast.Attribute \
                and value.func.attr in ("detach_", "zero_", "fill_", "copy_"):
            recv = value.func.value
            while type(recv) is ast.Subscript:  # hidden[0].detach_()
                recv = recv.value
            key = key_of(recv)
            if key:
                self._bound([key], ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if not ctx.loops:
            return
        targets = [k for t in node.targets for k in target_keys(t)]
        try:
            self._check(node, targets, ctx)
        finally:
            self._bound(targets, ctx)

    @staticmethod
    def _stream_loop(loop: LoopState, ctx: Context) -> bool:
        """Outside training and data loops, only inference over a stream counts: not
        unrolling over ``range(seq)`` inside a training step, nor a model's own methods."""
        facts = ctx.fn.facts
        if facts.has_backward or facts.has_step or ctx.fn.class_name is not None:
            return False
        it = getattr(loop.node, "iter", None)
        while type(it) is ast.Call and getattr(it.func, "id", "") in ("enumerate", "zip") \
                and it.args:
            it = it.args[0]
        if it is None or (type(it) is ast.Call and getattr(it.func, "id", "") == "range"):
            return False
        return True

    def _check(self, node: ast.Assign, targets: list[str], ctx: Context) -> None:
        call = node.value
        loop = ctx.loops[-1]
        if type(call) is not ast.Call or ctx.no_grad:
            return
        if is_forward_function(ctx.fn, ctx) or not ctx.flow.is_forward(call, strict=True):
            return
        if not (loop.training or loop.loader) and not self._stream_loop(loop, ctx):
            return
        bound = ctx.scratch.get(self.code, {}).get(id(loop.node), set())
        args: list[ast.expr] = []
        for arg in list(call.args) + [kw.value for kw in call.keywords]:
            if type(arg) in (ast.Tuple, ast.List):
                args.extend(arg.elts)  # type: ignore[attr-defined]
            else:
                args.append(arg)
        for arg in args:
            key = key_of(arg)
            if key is None or key not in targets or key in bound:
                continue
            if key not in loop.facts.assigned:
                continue
            if any(k == key and v is not call for k, v in loop.facts.assigns):
                continue  # re-bound elsewhere in the iteration (hidden = hidden.detach())
            if any(lp.facts.resets(key) for lp in ctx.loops[:-1]):
                continue  # re-initialised by an enclosing loop: unrolling within one step
            if _detached_in_place(key, loop.node):
                continue
            callee = describe(call.func)
            ctx.report(self, arg, (
                f"'{key}' is passed to {callee}() and re-assigned from its output on every "
                f"iteration without detach(): the graph links every batch to the previous one; "
                f"detach it at the start of the iteration"))
            return


def _detached_in_place(key: str, loop: ast.AST) -> bool:
    """Whether the loop body calls ``key.detach_()`` (or on one of its elements)."""
    for sub in ast.walk(loop):
        if type(sub) is ast.Call and type(sub.func) is ast.Attribute and sub.func.attr == "detach_":
            recv = sub.func.value
            while type(recv) is ast.Subscript:
                recv = recv.value
            if key_of(recv) == key:
                return True
    return False
