"""TMM3xx: views that keep a larger storage alive.

Slicing, ``view``, ``narrow``, ``transpose``, ``split`` and ``detach`` return views: new
tensor objects over the *same* storage. Memory is released per storage, so a view keeps
all of its base tensor's bytes alive, whatever its own size.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import GRAPH, LOOSE, TENSOR
from torchmem.lint.facts import key_of
from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._common import accumulation, describe, is_forward_function

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["ViewRetained"]

#: methods that return a view sharing the receiver's storage
_VIEW_METHODS = frozenset({
    "view", "narrow", "select", "t", "transpose", "permute", "squeeze", "unsqueeze",
    "expand", "expand_as", "unflatten", "view_as", "diagonal", "unfold", "movedim",
    "swapaxes", "detach", "real", "imag", "as_strided",
})
#: methods whose elements are views (``x.split(n)[0]``)
_VIEW_SEQUENCES = frozenset({"split", "chunk", "unbind", "tensor_split"})


def _basic_index(node: ast.AST) -> bool:
    """Basic indexing (ints, slices, ``...``, ``None``) returns a view; anything else may copy."""
    t = type(node)
    if t is ast.Tuple:
        return all(_basic_index(e) for e in node.elts)  # type: ignore[attr-defined]
    if t is ast.Slice:
        return True
    if t is ast.Constant:
        return node.value is None or node.value is Ellipsis or (  # type: ignore[attr-defined]
            isinstance(node.value, int) and not isinstance(node.value, bool))  # type: ignore[attr-defined]
    if t is ast.UnaryOp and type(node.op) is ast.USub:  # type: ignore[attr-defined]
        return isinstance(node.operand, ast.Constant) and isinstance(  # type: ignore[attr-defined]
            node.operand.value, int)  # type: ignore[attr-defined]
    return False


def view_base(node: ast.AST) -> ast.expr | None:
    """The tensor a view expression is taken from, or ``None`` if it is not a view.

    ``out[:, -1]`` -> ``out``; ``out[0].detach()`` -> ``out``; ``x.split(4)[0]`` -> ``x``.
    """
    found = False
    while True:
        t = type(node)
        if t is ast.Subscript:
            sub = node.slice  # type: ignore[attr-defined]
            value = node.value  # type: ignore[attr-defined]
            if type(value) is ast.Call and type(value.func) is ast.Attribute and \
                    value.func.attr in _VIEW_SEQUENCES:
                node, found = value.func.value, True
                continue
            if not _basic_index(sub):
                return None
            node, found = value, True
            continue
        if t is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr in _VIEW_METHODS:  # type: ignore[attr-defined]
            if node.func.attr == "detach" and not found:  # type: ignore[attr-defined]
                # x.detach() alone is not a "small slice"; keep looking beneath it
                node = node.func.value  # type: ignore[attr-defined]
                continue
            node, found = node.func.value, True  # type: ignore[attr-defined]
            continue
        if t is ast.Attribute and node.attr in ("T", "mT", "real", "imag"):  # type: ignore[attr-defined]
            node, found = node.value, True  # type: ignore[attr-defined]
            continue
        break
    if not found or type(node) not in (ast.Name, ast.Attribute):
        return None
    return node  # type: ignore[return-value]


@register
class ViewRetained(Rule):
    """A slice (view) of a per-iteration tensor kept in a long-lived container.

    What:
        Flags ``last.append(out[:, -1])``, ``rows[k] = batch_out[0]`` or
        ``firsts.append(x.split(4)[0])`` in a loop, when the sliced tensor is computed anew
        on every iteration and the container outlives the iteration, and no ``.clone()``
        (or ``.item()``/``.tolist()``) makes a copy. Slicing, ``view``, ``narrow``,
        ``select``, ``transpose``, ``split``/``chunk`` elements and ``.detach()`` all return
        views that share the base tensor's storage.

    Why:
        A view keeps its whole storage alive, however small the view. Keeping the last
        time step of a ``(batch, seq, hidden)`` output keeps the full output of every
        batch: memory grows by the size of the full tensor per iteration, not by the size
        of the slice.

    Known problems:
        Indexing with a tensor or a list (advanced indexing) copies and is not flagged.
        Whether the base tensor is "large" is not known statically; a slice of a small
        tensor is harmless but still flagged when it is kept every iteration.

    Example:
        ```python
        last = []
        with torch.no_grad():
            for x in loader:
                out = model(x)
                last.append(out[:, -1])
        ```

    Use instead:
        ```python
        last = []
        with torch.no_grad():
            for x in loader:
                out = model(x)
                last.append(out[:, -1].clone())
        ```
    """

    code = "TMM301"
    name = "view-retained"
    summary = "view of a per-iteration tensor kept in a long-lived container without clone()"
    fix_title = "Copy the slice with .clone()"
    fix_safety = "unsafe"  # the kept value stops aliasing the base tensor

    def _check(self, node: ast.AST, ctx: Context) -> None:
        acc = accumulation(node, ctx)
        if acc is None or acc.how == "add":
            return
        base = view_base(acc.value)
        if base is None:
            return
        kind = ctx.kind(acc.value)
        if kind & GRAPH:
            return  # TMM101 reports the graph, which is the bigger problem
        base_kind = ctx.kind(base)
        if not base_kind & (TENSOR | GRAPH) or base_kind & LOOSE:
            return
        loops = ctx.persistent_loops(acc.key)
        if not loops:
            return
        base_key = key_of(base)
        if base_key is None or base_key not in loops[0].facts.assigned:
            return
        if is_forward_function(ctx.fn, ctx):
            return
        line, col, end_line, end_col = ctx.span(acc.value)
        fix = [ctx.edit((end_line, end_col), (end_line, end_col), ".clone()")]
        v = describe(acc.value)
        ctx.report(self, acc.value, (
            f"'{v}' is a view of '{base_key}', which is new on every iteration; keeping it in "
            f"'{acc.key}' keeps the whole storage of '{base_key}' alive each time; keep "
            f"'{v}.clone()'"), fix)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.loops and type(node.func) is ast.Attribute:
            self._check(node, ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if ctx.loops:
            self._check(node, ctx)
