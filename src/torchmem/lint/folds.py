"""State folded with a graph-carrying value: ``self.X`` updated from its own old value (no torch).

``self.memory = m * self.memory + (1 - m) * means`` or
``self._avg.add_(rate * (x - self._avg))`` with ``means``/``x`` computed while autograd
records: the new value of the attribute is a tensor whose graph reaches the previous value,
whose graph reaches the one before, and so on: every call chains its graph (and the
activations it saved) onto the object's state, which lives as long as the object.

:func:`folded_state` recognises the statement; whether the folded value carries a graph is
read from the data flow at that point (:meth:`Context.kind`), never from the attribute
itself (a state that already carries a graph proves nothing about this statement). Used by
the summaries of methods (:mod:`torchmem.lint.summaries`: a fold is a store of the value
on ``self``) and by the rule for methods of plain classes (:mod:`torchmem.lint.rules.graph`).

What counts as folding the old value: an in-place tensor method on ``self.X`` (or an item of
it, or a chain of them: ``self.X.mul_(d).add_(v)``) given a graph-carrying argument; an
assignment or augmented assignment to ``self.X`` (or an item of it) whose value uses
``self.X`` as an operand of arithmetic, as a part joined by ``torch.cat``/``torch.stack``,
or as the argument that a helper of the file updates in place
(``self.avg = lerp(self.avg, x, d)`` where ``lerp`` runs ``old.lerp_(new, 1 - d)``).
A value that reads ``self.X`` only through ``.detach()``, ``.data`` or ``.item()`` does not
chain (the old graph is cut), and neither does a plain overwrite (``self.last = loss``: one
graph, replaced at each call).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING

from torchmem.lint.kinds import GRAPH

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["folded_state", "helper_updates", "reads_old", "INPLACE_UPDATES"]

#: in-place tensor methods that fold their arguments into the receiver
INPLACE_UPDATES = frozenset({"add_", "sub_", "mul_", "div_", "copy_", "lerp_", "addcmul_",
                             "addcdiv_", "set_", "addmm_", "addmv_", "baddbmm_"})
#: calls that join their first argument's parts into a new tensor
_JOINS = frozenset({"cat", "stack", "concat", "concatenate", "hstack", "vstack", "dstack"})


def _self_attr(node: ast.AST) -> str | None:
    """``X`` of ``self.X`` or of an item of it (``self.X[k]``)."""
    if type(node) is ast.Subscript:
        node = node.value  # type: ignore[attr-defined]
    if type(node) is ast.Attribute and type(node.value) is ast.Name and \
            node.value.id == "self":  # type: ignore[attr-defined]
        return node.attr  # type: ignore[attr-defined]
    return None


def _chain_root(recv: ast.expr) -> ast.expr:
    """What a chain of in-place updates starts from: ``x`` of ``x.mul_(d).add_``."""
    while type(recv) is ast.Call and type(recv.func) is ast.Attribute and \
            recv.func.attr in INPLACE_UPDATES:  # type: ignore[attr-defined]
        recv = recv.func.value  # type: ignore[attr-defined]
    return recv


def _inplace_receiver(func: ast.Attribute) -> str | None:
    """``X`` when ``func`` is an in-place update of ``self.X`` (through a chain of them)."""
    return _self_attr(_chain_root(func.value))


def helper_updates(call: ast.Call, functions: Mapping[str, ast.AST]) -> list[ast.expr]:
    """The arguments of ``call`` that the function it calls, a top-level function of the
    file, updates in place (``def lerp(old, new, d): old.lerp_(new, 1 - d); return old``):
    ``[self.embed_avg]`` for ``lerp(self.embed_avg, embed_sum, self.decay)``."""
    func = call.func
    node = functions.get(func.id) if type(func) is ast.Name else None  # type: ignore[attr-defined]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    updated: set[str] = set()
    for sub in ast.walk(node):
        if type(sub) is ast.Call and type(sub.func) is ast.Attribute and \
                sub.func.attr in INPLACE_UPDATES:  # type: ignore[attr-defined]
            recv = _chain_root(sub.func.value)  # type: ignore[attr-defined]
            if type(recv) is ast.Name and recv.id in params:  # type: ignore[attr-defined]
                updated.add(recv.id)  # type: ignore[attr-defined]
    return [arg for p, arg in zip(params, call.args) if p in updated]


def reads_old(value: ast.AST, name: str, functions: Mapping[str, ast.AST]) -> bool:
    """Whether ``value`` uses ``self.name`` as an operand of arithmetic, as a part joined
    by ``torch.cat``/``torch.stack``, or as the argument a helper of the file updates in
    place (:func:`helper_updates`); not through ``.detach()``."""
    for node in ast.walk(value):
        t = type(node)
        if t is ast.BinOp:
            if _self_attr(node.left) == name or _self_attr(node.right) == name:  # type: ignore[attr-defined]
                return True
        elif t is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            last = func.attr if type(func) is ast.Attribute else (
                func.id if type(func) is ast.Name else "")
            if last in _JOINS and node.args:  # type: ignore[attr-defined]
                first = node.args[0]  # type: ignore[attr-defined]
                parts = first.elts if type(first) in (ast.Tuple, ast.List) else [first]
                if any(_self_attr(p) == name for p in parts):
                    return True
            if any(_self_attr(a) == name for a in helper_updates(node, functions)):  # type: ignore[arg-type]
                return True
    return False


def _graph_besides(value: ast.expr, name: str, ctx: Context) -> bool:
    """Whether ``value`` carries a graph through something other than ``self.name``."""
    if not ctx.kind(value) & GRAPH:
        return False
    todo: list[ast.AST] = [value]
    while todo:
        node = todo.pop()
        if _self_attr(node) == name:
            continue
        t = type(node)
        if t in (ast.Name, ast.Call, ast.Attribute, ast.Subscript) and \
                ctx.kind(node) & GRAPH and not any(
                    _self_attr(n) == name for n in ast.walk(node)):
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def folded_state(node: ast.AST, ctx: Context) -> tuple[str, ast.expr] | None:
    """``(X, value)`` when statement or call ``node`` folds graph-carrying ``value`` into
    ``self.X`` from its old value (see the module docstring); ``None`` otherwise."""
    t = type(node)
    if t is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        if type(func) is not ast.Attribute or func.attr not in INPLACE_UPDATES:
            return None
        name = _inplace_receiver(func)
        if name is None:
            return None
        for arg in list(node.args) + [kw.value for kw in node.keywords]:  # type: ignore[attr-defined]
            if _graph_besides(arg, name, ctx):
                return name, arg
        return None
    if t is ast.Assign and len(node.targets) == 1:  # type: ignore[attr-defined]
        name = _self_attr(node.targets[0])  # type: ignore[attr-defined]
        value = node.value  # type: ignore[attr-defined]
        functions = ctx.summaries.functions if ctx.summaries is not None else {}
        if name is None or not reads_old(value, name, functions):
            return None
    elif t is ast.AugAssign and type(node.op) is not ast.Add:  # type: ignore[attr-defined]
        name = _self_attr(node.target)  # type: ignore[attr-defined]
        value = node.value  # type: ignore[attr-defined]
        if name is None:
            return None  # (self.X += v is a running sum, a store of its own)
    else:
        return None
    return (name, value) if _graph_besides(value, name, ctx) else None
