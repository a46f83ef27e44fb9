"""Callables a class receives in ``__init__``, annotated as returning tensors (no torch).

``update_function: Callable[..., tuple[torch.Tensor, int]]`` stored as
``self._update_function``: a metric or a statistic that calls it in ``update()`` gets
tensors computed by the caller's code. Like the tensor-annotated parameters of such a
method (:meth:`torchmem.lint.summaries.Summaries.if_given_graphs`), they are taken to
carry an autograd graph when the method is judged as if given graphs; anywhere else the
call stays unknown.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import all_statements, walk
from torchmem.lint.kinds import CONTAINER, GRAPH, TYPED

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context
    from torchmem.lint.dataflow import Flow
    from torchmem.lint.summaries import Summary

__all__ = ["GIVEN_GRAPHS", "callback_summary", "class_tensor_callables", "tensor_callables"]

#: scratch key set while a method is walked as if given graphs
GIVEN_GRAPHS = "callbacks.given_graphs"
#: scratch key of the per-class cache of :func:`tensor_callables` (``id(class node)``)
_CALLABLES = "callbacks.tensor_callables"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _returned(annotation: ast.expr) -> tuple[int, ...] | int | None:
    """Kinds of what a ``Callable[..., R]`` annotation (or a union of them) returns: one
    kind for a tensor, one per element for a ``tuple[...]``; ``None`` if no tensor."""
    found: tuple[int, ...] | int | None = None
    for node in walk(annotation):
        if type(node) is not ast.Subscript or "Callable" not in ast.unparse(node.value):
            continue
        sl = node.slice
        if type(sl) is not ast.Tuple or len(sl.elts) != 2:
            continue
        ret = sl.elts[1]
        if type(ret) is ast.Subscript and ast.unparse(ret.value).rpartition(".")[2] in (
                "tuple", "Tuple") and type(ret.slice) is ast.Tuple:
            kinds = tuple(GRAPH | TYPED if "Tensor" in ast.unparse(e) else 0
                          for e in ret.slice.elts)
            if any(kinds):
                found = kinds
        elif "Tensor" in ast.unparse(ret):
            found = GRAPH | TYPED
    return found


def tensor_callables(cls: ast.ClassDef) -> dict[str, tuple[int, ...] | int]:
    """``attr -> returned kinds`` for ``self.attr = param`` in ``__init__`` where ``param``
    is annotated as a callable returning tensors."""
    init = next((s for s in cls.body if isinstance(s, _FUNCS) and s.name == "__init__"), None)
    if init is None:
        return {}
    args = init.args
    returned: dict[str, tuple[int, ...] | int] = {}
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        if a.annotation is not None:
            kinds = _returned(a.annotation)
            if kinds is not None:
                returned[a.arg] = kinds
    out: dict[str, tuple[int, ...] | int] = {}
    if not returned:
        return out  # no parameter is a callable returning tensors: nothing to look for
    for stmt in all_statements(init):
        if type(stmt) is ast.Assign and len(stmt.targets) == 1 and \
                type(stmt.value) is ast.Name and stmt.value.id in returned:
            target = stmt.targets[0]
            if type(target) is ast.Attribute and type(target.value) is ast.Name and \
                    target.value.id == "self":
                out[target.attr] = returned[stmt.value.id]
    return out


def class_tensor_callables(cls: ast.ClassDef, ctx: Context
                           ) -> dict[str, tuple[int, ...] | int]:
    """:func:`tensor_callables` of ``cls``, computed once per file."""
    cache = ctx.scratch.setdefault(_CALLABLES, {})
    known = cache.get(id(cls))
    if known is None:
        known = cache[id(cls)] = tensor_callables(cls)
    return known  # type: ignore[no-any-return]


def callback_summary(call: ast.Call, flow: Flow) -> Summary | None:
    """A summary of ``self.attr(...)`` for such a callable, while the current method is
    walked as if given graphs (and autograd records)."""
    ctx = flow.ctx
    func = call.func
    if not ctx.scratch.get(GIVEN_GRAPHS) or ctx.no_grad or type(func) is not ast.Attribute \
            or type(func.value) is not ast.Name or func.value.id != "self":
        return None  # nearly every call: nothing imported, nothing looked up
    from torchmem.lint.summaries import Summary

    fn = ctx.fn
    summaries = ctx.summaries
    cls = summaries.classes.get(fn.class_name or "") if summaries is not None else None
    if cls is None:
        return None
    kinds = class_tensor_callables(cls, ctx).get(func.attr)
    if kinds is None:
        return None
    if isinstance(kinds, tuple):
        returns = 0
        for k in kinds:
            returns |= k
        return Summary(returns & ~TYPED | CONTAINER, (), f"{cls.name}.{func.attr}", kinds)
    return Summary(kinds, (), f"{cls.name}.{func.attr}")
