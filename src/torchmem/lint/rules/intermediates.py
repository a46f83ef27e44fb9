"""TMM904-TMM905: large intermediates that an equivalent call would not make (off by default).

Two shapes of code allocate memory that the result does not need: a pairwise
difference or product built by broadcasting and then reduced over its last axis (an
``N x M x D`` tensor for an ``N x M`` answer), and a ``.contiguous()`` copy of a
transposed tensor handed straight to a matrix product, which reads strided input
itself. Both are opinionated rules: the intermediate may be small, and the rewrite can
change rounding (``torch.cdist`` computes Euclidean distances through a matrix product
for large inputs).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._common import describe, is_forward_function

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["ContiguousBeforeMatmul", "PairwiseBroadcast"]

#: element-wise wrappers between the broadcast and the reduction
_ELEMENTWISE = frozenset({"pow", "abs", "square", "abs_", "pow_", "square_"})
_TORCH_ELEMENTWISE = frozenset({"torch.abs", "torch.square", "torch.pow"})
#: reductions over an axis, as methods and as torch functions
_REDUCE = frozenset({"sum", "norm", "mean"})
_TORCH_REDUCE = frozenset({"torch.sum", "torch.norm", "torch.mean", "torch.linalg.norm",
                           "torch.linalg.vector_norm"})
#: calls that read a transposed (strided) operand without a copy made by the caller
_MATMUL = frozenset({"torch.matmul", "torch.mm", "torch.bmm", "torch.einsum", "torch.baddbmm",
                     "torch.addmm", "torch.nn.functional.linear"})
_TRANSPOSES = frozenset({"transpose", "permute", "t", "swapaxes", "swapdims", "movedim"})


def _reduced_axis(node: ast.Call, pos: int) -> int | None:
    """The single axis a reduction call reduces (``-1``, ``1``...), given as ``dim=``/
    ``axis=`` or as its ``pos``-th positional argument; ``None`` if not one literal."""
    dims = [kw.value for kw in node.keywords if kw.arg in ("dim", "axis")]
    if not dims and len(node.args) > pos:
        dims = [node.args[pos]]
    if len(dims) != 1:
        return None
    dim = dims[0]
    if type(dim) is ast.UnaryOp and type(dim.op) is ast.USub and isinstance(
            dim.operand, ast.Constant) and dim.operand.value == 1:
        return -1
    if isinstance(dim, ast.Constant) and type(dim.value) is int and dim.value >= 0:
        return dim.value
    return None


def _inserted_axis(node: ast.AST, ctx: Context) -> tuple[int, bool] | None:
    """The position of the axis a broadcast operand inserts (``a[:, None]`` -> 1,
    ``b.unsqueeze(0)`` -> 0) and whether an axis visibly follows it (``a[:, None, :]``)."""
    if type(node) is ast.Subscript:
        sl = node.slice  # type: ignore[attr-defined]
        elts = sl.elts if type(sl) is ast.Tuple else [sl]
        nones = [i for i, e in enumerate(elts) if isinstance(e, ast.Constant) and e.value is None]
        if len(nones) != 1 or any(isinstance(e, ast.Constant) and e.value is Ellipsis
                                  for e in elts):
            return None
        if any(type(e) is not ast.Slice and i != nones[0] for i, e in enumerate(elts)):
            return None  # an index, not a slice: a[i, None]
        # a feature axis is known when the input has two explicit axes or more and one
        # comes after the inserted axis (x[:, None, :]; not s[None, :] of a 1-D s)
        return nones[0], len(elts) >= 3 and nones[0] < len(elts) - 1
    if type(node) is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        args = node.args  # type: ignore[attr-defined]
        if type(func) is ast.Attribute and func.attr == "unsqueeze" and len(args) == 1:
            dim = args[0]
        elif ctx.qualname(func) == "torch.unsqueeze" and len(args) == 2:
            dim = args[1]
        else:
            return None
        if isinstance(dim, ast.Constant) and type(dim.value) is int and dim.value >= 0:
            return dim.value, False
    return None


def _resolve(node: ast.AST, ctx: Context) -> ast.AST:
    """A name with exactly one binding in the function stands for its value."""
    for _ in range(3):
        if type(node) is not ast.Name:
            return node
        defs = ctx.fn.facts.defs.get(node.id, ())  # type: ignore[attr-defined]
        if len(defs) != 1:
            return node
        node = defs[0]
    return node


def _strip_elementwise(node: ast.AST, ctx: Context) -> ast.AST:
    """The operand under element-wise wrappers (``** 2``, ``.abs()``, ``torch.square``...)."""
    while True:
        node = _resolve(node, ctx)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            node = node.left
        elif isinstance(node, ast.UnaryOp):
            node = node.operand
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _ELEMENTWISE:
            node = node.func.value
        elif isinstance(node, ast.Call) and node.args and \
                ctx.qualname(node.func) in _TORCH_ELEMENTWISE:
            node = node.args[0]
        else:
            return node


def _pairwise(node: ast.AST, axis: int, norm: bool, ctx: Context) -> ast.BinOp | None:
    """``a[:, None] - b[None]`` / ``a.unsqueeze(1) * b.unsqueeze(0)`` reduced over a shared
    (feature) axis: two operands that insert an axis at different positions, and a
    reduced ``axis`` that is neither of them. The last axis (``-1``) is known to be a
    feature axis when an operand shows an axis after its inserted one (``a[:, None, :]``)
    or when the reduction is a norm (a distance)."""
    node = _strip_elementwise(node, ctx)
    if type(node) is not ast.BinOp or type(node.op) not in (ast.Sub, ast.Mult):
        return None
    left = _inserted_axis(_resolve(node.left, ctx), ctx)
    right = _inserted_axis(_resolve(node.right, ctx), ctx)
    if left is None or right is None or left[0] == right[0]:
        return None
    if axis == -1:
        return node if (left[1] or right[1] or norm) else None
    return node if axis not in (left[0], right[0]) else None


@register
class PairwiseBroadcast(Rule):
    """A pairwise difference or product built by broadcasting, then reduced over its last axis.

    What:
        Flags ``.sum(d)``, ``.norm(dim=d)``, ``.mean(d)`` (and ``torch.sum``,
        ``torch.norm``, ``torch.linalg.norm``/``vector_norm``) of
        ``a[:, None, :] - b[None, :, :]``, ``a.unsqueeze(1) * b.unsqueeze(0)`` and the
        like, also through ``** 2``, ``.pow()``, ``.abs()``, ``.square()`` and through a
        name bound once to the broadcast expression, when the reduced axis ``d`` is one
        both inputs share (not an inserted one). For ``d = -1`` an operand must show an
        axis after its inserted one (``a[:, None, :]``), or the reduction must be a norm
        (a distance), so that the last axis is known to be a feature axis.

    Why:
        With ``a`` of shape ``N x D`` and ``b`` of shape ``M x D`` the broadcast builds an
        ``N x M x D`` tensor (and autograd keeps it for backward) only to reduce it to
        ``N x M``: ``D`` times the memory of the result. ``torch.cdist(a, b)`` (distances,
        ``p=1`` for absolute differences), ``a @ b.T`` or ``torch.einsum("nd,md->nm", a,
        b)`` (products) and ``a.square().sum(-1)[:, None] - 2 * a @ b.T +
        b.square().sum(-1)`` (squared distances) never materialise it.

    Known problems:
        Off by default: with a small ``D`` (3-D points) the intermediate is cheap, and
        ``torch.cdist`` computes large Euclidean distances through a matrix product, which
        rounds differently (``compute_mode="donot_use_mm_for_euclid_dist"`` avoids it).
        Only the subscript and ``unsqueeze`` spellings with literal positions are seen.

    Example:
        ```python
        def pairwise_dist(x, y):
            return (x[:, None, :] - y[None, :, :]).pow(2).sum(-1).sqrt()
        ```

    Use instead:
        ```python
        def pairwise_dist(x, y):
            return torch.cdist(x, y)
        ```
    """

    code = "TMM904"
    name = "pairwise-broadcast"
    summary = "pairwise broadcast (a[:, None] - b[None]) reduced over its last axis"
    default_enabled = False
    category = "performance"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        qual = ctx.qualname(func)
        if qual in _TORCH_REDUCE and node.args:
            operand: ast.AST = node.args[0]
            axis = _reduced_axis(node, 1 if qual in ("torch.sum", "torch.mean") else 2)
            norm = "norm" in qual  # type: ignore[operator]
        elif type(func) is ast.Attribute and func.attr in _REDUCE:
            operand = func.value
            axis = _reduced_axis(node, 1 if func.attr == "norm" else 0)
            norm = func.attr == "norm"
        else:
            return
        if axis is None:
            return
        pair = _pairwise(operand, axis, norm, ctx)
        if pair is None:
            return
        kind = "difference" if type(pair.op) is ast.Sub else "product"
        instead = "torch.cdist()" if kind == "difference" else "a matrix product (a @ b.T, einsum)"
        ctx.report(self, node, (
            f"'{describe(pair)}' materialises every pairwise {kind} (N x M x D) before "
            f"'.{getattr(func, 'attr', 'sum')}' reduces it to N x M; {instead} computes the "
            f"result without it"))


def _transposed_copy(node: ast.AST) -> ast.Call | None:
    """``x.transpose(1, 2).contiguous()`` (or ``.permute``, ``.t()``, ``.T``, ``.mT``)."""
    if type(node) is not ast.Call or node.args or node.keywords:  # type: ignore[attr-defined]
        return None
    func = node.func  # type: ignore[attr-defined]
    if type(func) is not ast.Attribute or func.attr != "contiguous":
        return None
    inner = func.value
    if type(inner) is ast.Call and type(inner.func) is ast.Attribute and \
            inner.func.attr in _TRANSPOSES:
        return node  # type: ignore[return-value]
    if type(inner) is ast.Attribute and inner.attr in ("T", "mT"):
        return node  # type: ignore[return-value]
    return None


@register
class ContiguousBeforeMatmul(Rule):
    """A transposed tensor copied with ``.contiguous()`` only to be multiplied.

    What:
        Flags ``x.transpose(...).contiguous()`` (also after ``.permute``, ``.t()``,
        ``.swapaxes``, ``.T``, ``.mT``) used directly as an operand of ``@`` or of
        ``torch.matmul``/``mm``/``bmm``/``baddbmm``/``addmm``/``einsum``/``F.linear``, in a
        loop or in a module's forward pass.

    Why:
        Matrix products read transposed (strided) operands as they are: BLAS takes a
        transposed layout for free, and other strides are copied inside the kernel only
        when needed. The explicit ``.contiguous()`` allocates and fills a full copy on
        every call (kept for backward when it requires grad); the product is the same up
        to rounding (a different layout may take a different kernel).

    Known problems:
        Off by default: the copy is rarely large next to the product, and a few custom
        kernels do need contiguous input (the rule only looks at torch's own products),
        and TorchScript once needed it in places. A comprehension is not seen as a
        loop. ``.contiguous()`` on a tensor that already is contiguous (a fresh
        ``torch.zeros(...)``) is not flagged: it returns the tensor itself, no copy.

    Example:
        ```python
        class Scores(torch.nn.Module):
            def forward(self, q, k):
                return q @ k.transpose(-2, -1).contiguous()
        ```

    Use instead:
        ```python
        class Scores(torch.nn.Module):
            def forward(self, q, k):
                return q @ k.transpose(-2, -1)
        ```
    """

    code = "TMM905"
    name = "contiguous-before-matmul"
    summary = "x.transpose(...).contiguous() handed straight to a matrix product"
    default_enabled = False
    category = "performance"

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> None:
        if type(node.op) is ast.MatMult:
            self._check((node.left, node.right), ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.qualname(node.func) in _MATMUL:
            self._check(list(node.args) + [kw.value for kw in node.keywords], ctx)

    def _check(self, operands: list[ast.expr] | tuple[ast.expr, ...], ctx: Context) -> None:
        for operand in operands:
            copy = _transposed_copy(operand)
            if copy is None or not (ctx.loops or is_forward_function(ctx.fn, ctx)):
                continue
            ctx.report(self, copy, (
                f"'{describe(copy)}' copies a transposed tensor only to multiply it: matrix "
                f"products read strided operands themselves; drop .contiguous()"))
