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

#: methods that return a smaller view of the receiver's storage
_NARROWING = frozenset({"narrow", "select", "diagonal", "as_strided"})
#: methods that return a view of the same elements (they neither add nor remove waste)
_SAME_SIZE_VIEWS = frozenset({
    "view", "t", "transpose", "permute", "squeeze", "unsqueeze", "expand", "expand_as",
    "unflatten", "view_as", "movedim", "swapaxes", "detach", "flatten", "reshape",
})
#: methods whose elements are views (``x.split(n)[0]``)
_VIEW_SEQUENCES = frozenset({"split", "chunk", "unbind", "tensor_split"})


def _const_bound(node: ast.AST | None) -> bool:
    if node is None or isinstance(node, ast.Constant):
        return True
    return type(node) is ast.UnaryOp and isinstance(node.operand, ast.Constant)  # type: ignore[attr-defined]


def _basic_index(node: ast.AST) -> bool:
    """Constant basic indexing (ints, constant slices, ``...``, ``None``) returns a view.

    Indices that vary with the loop (``x[i]``, ``x[i:i + 1]``) usually walk over every
    part of the tensor, so nothing is wasted; tensor or list indices copy.
    """
    t = type(node)
    if t is ast.Tuple:
        return all(_basic_index(e) for e in node.elts)  # type: ignore[attr-defined]
    if t is ast.Slice:
        return _const_bound(node.lower) and _const_bound(node.upper) and _const_bound(  # type: ignore[attr-defined]
            node.step)  # type: ignore[attr-defined]
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
        if t is ast.Call and type(node.func) is ast.Attribute:  # type: ignore[attr-defined]
            attr = node.func.attr  # type: ignore[attr-defined]
            if attr in _SAME_SIZE_VIEWS:
                node = node.func.value  # type: ignore[attr-defined]
                continue
            if attr in _NARROWING and all(_const_bound(a) for a in node.args):  # type: ignore[attr-defined]
                node, found = node.func.value, True  # type: ignore[attr-defined]
                continue
            break
        if t is ast.Attribute and node.attr in ("T", "mT", "real", "imag"):  # type: ignore[attr-defined]
            node = node.value  # type: ignore[attr-defined]
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
        ``firsts.append(x.split(4)[0])`` in a training loop or a loop over a data loader,
        when the sliced tensor is computed anew on every iteration, the container outlives
        the iteration, and no ``.clone()`` (or ``.item()``/``.tolist()``) makes a copy.
        Constant indexing and slicing, ``narrow``, ``select`` and ``split``/``chunk``
        elements return views that share the base tensor's storage (``view``,
        ``transpose`` or ``.detach()`` on top do not change that).

    Why:
        A view keeps its whole storage alive, however small the view. Keeping the last
        time step of a ``(batch, seq, hidden)`` output keeps the full output of every
        batch: memory grows by the size of the full tensor per iteration, not by the size
        of the slice.

    Known problems:
        Indexing with a tensor or a list (advanced indexing) copies and is not flagged.
        Indices that change with the loop (``x[i]``) are not flagged: such loops usually
        keep every part of the tensor, which wastes nothing.
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
        if acc is None or acc.how in ("add", "concat"):
            return  # addition and concatenation copy
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
        if not loops or not any(lp.training or lp.loader for lp in loops):
            return  # only per-step loops (training, or over batches) multiply the waste
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


@register
class DelKeepsView(Rule):
    """``del x`` (or ``x = None``) while a slice of ``x`` is still held.

    What:
        Flags ``del x`` and ``x = None`` when, earlier in the same function, a name was
        bound to a constant slice or narrowing view of ``x`` (``y = x[0]``,
        ``y = x.narrow(0, 0, 1)``, ``y = x.split(4)[0]``) and was not re-bound since.

    Why:
        Memory is released per storage. The view ``y`` references ``x``'s whole storage,
        so deleting the name ``x`` frees nothing: the full tensor stays in memory for as
        long as ``y`` lives, which is rarely what the ``del`` was written for.

    Known problems:
        The rule does not check that ``y`` is used after the ``del``; a view that is dead
        by then does not keep anything alive in practice (CPython frees it when its name
        is re-bound or the function returns).

    Example:
        ```python
        x = torch.randn(10_000, 10_000)
        y = x[0, :]
        del x
        ```

    Use instead:
        ```python
        x = torch.randn(10_000, 10_000)
        y = x[0, :].clone()
        del x
        ```
    """

    code = "TMM302"
    name = "del-keeps-view"
    summary = "del of a tensor whose slice is still held frees nothing"
    fix_title = "Copy the slice with .clone()"
    fix_safety = "unsafe"  # the kept value stops aliasing the base tensor

    def _views(self, ctx: Context) -> dict[str, tuple[str, ast.expr]]:
        per_fn: dict[int, dict[str, tuple[str, ast.expr]]] = ctx.scratch.setdefault(
            self.code, {})
        return per_fn.setdefault(id(ctx.fn.node), {})

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        views = self._views(ctx)
        value = node.value
        for target in node.targets:
            key = key_of(target)
            if key is None:
                continue
            if isinstance(value, ast.Constant) and value.value is None:
                self._released(key, target, ctx)
            for y in [y for y, (base, _) in views.items() if y == key or base == key]:
                del views[y]
        if len(node.targets) != 1 or type(node.targets[0]) is not ast.Name:
            return
        base = view_base(value)
        if base is None:
            return
        kind = ctx.kind(base)
        base_key = key_of(base)
        if base_key and kind & (TENSOR | GRAPH) and not kind & LOOSE:
            views[node.targets[0].id] = (base_key, value)  # type: ignore[attr-defined]

    def visit_Delete(self, node: ast.Delete, ctx: Context) -> None:
        for target in node.targets:
            elts = target.elts if type(target) is ast.Tuple else [target]  # type: ignore[attr-defined]
            for elt in elts:
                key = key_of(elt)
                if key is not None:
                    self._released(key, elt, ctx)

    def _released(self, key: str, where: ast.AST, ctx: Context) -> None:
        views = self._views(ctx)
        for y, (base, value) in list(views.items()):
            if base != key:
                continue
            line, col, end_line, end_col = ctx.span(value)
            fix = [ctx.edit((end_line, end_col), (end_line, end_col), ".clone()")]
            ctx.report(self, where, (
                f"releasing '{key}' frees nothing while '{y}' (line {line}) is a view of it: the "
                f"whole storage stays alive; keep '{y} = {describe(value)}.clone()'"), fix)
            del views[y]
