"""Containers whose latest element is differentiated in the loop that fills them (no torch).

``losses.append(step_loss)`` followed by ``losses[-1].backward()`` in the same loop body, or
``losses[i], cost = closure()`` followed by ``losses[i - 1].backward()``: whatever the
value's origin (a callback, a function of another file), calling ``backward()`` on an
element is evidence that the container holds tensors with an autograd graph. When the
container outlives the loop iterations, every earlier element keeps its graph (and, with
``retain_graph=True``, its saved activations).

A container that is differentiated as a whole (``sum(losses).backward()``,
``torch.stack(losses).mean().backward()``) keeps its graphs on purpose and is not
reported, nor is a container whose elements are differentiated only in another loop (micro
batches kept for a later backward).

The same evidence marks the other elements of a tuple one element of which the loop
differentiates: ``losses = compute_losses(batch)`` then ``losses[0].backward()`` makes
``losses[1]`` a tensor of the same computation (a loss function returning ``(loss,
*metrics)``), so folding it into a running value keeps its graph.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NamedTuple

from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import GRAPH_FREE_BUILTINS, NO_GRAPH_METHODS, SCALAR_METHODS

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context, LoopState

__all__ = ["ElementStore", "differentiated_sibling", "element_store"]


class ElementStore(NamedTuple):
    """``value`` is kept in ``key``, an element of which ``call`` differentiates."""

    key: str
    value: ast.expr
    how: str
    call: ast.Call


def _differentiated_element(key: str, loop: LoopState) -> ast.Call | None:
    """A ``key[i].backward()`` call in the body of ``loop``."""
    for call in loop.facts.backward:
        func = call.func
        if type(func) is ast.Attribute and func.attr == "backward" and \
                type(func.value) is ast.Subscript and key_of(func.value.value) == key:
            return call
    return None


def _whole(key: str, ctx: Context) -> bool:
    """Whether the function differentiates ``key`` other than through one element."""
    for root in ctx.fn.facts.backward_roots:
        if type(root) is ast.Subscript and key_of(root.value) == key:
            continue
        for sub in ast.walk(root):
            if type(sub) in (ast.Name, ast.Attribute) and key_of(sub) == key:
                return True
    return False


def _graph_free(value: ast.expr) -> bool:
    """``loss.item()``, ``float(loss)``, ``out.detach()``, a constant: holds no graph."""
    if type(value) is ast.Constant:
        return True
    if type(value) is not ast.Call:
        return False
    func = value.func
    if type(func) is ast.Attribute:
        return func.attr in SCALAR_METHODS or func.attr in NO_GRAPH_METHODS
    return type(func) is ast.Name and func.id in GRAPH_FREE_BUILTINS


def _stored(node: ast.AST) -> list[tuple[str, ast.expr, str]]:
    """``(container, value, how)`` for ``xs.append(v)`` and ``xs[i] = v`` (a tuple target
    with such an element included: the value is the whole right-hand side)."""
    t = type(node)
    if t is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        args = node.args  # type: ignore[attr-defined]
        if type(func) is ast.Attribute and func.attr == "append" and len(args) == 1:
            key = key_of(func.value)
            return [(key, args[0], "append")] if key else []
        return []
    if t is not ast.Assign or len(node.targets) != 1:  # type: ignore[attr-defined]
        return []
    target = node.targets[0]  # type: ignore[attr-defined]
    elts = target.elts if type(target) in (ast.Tuple, ast.List) else [target]
    out = []
    for elt in elts:
        if type(elt) is ast.Subscript and not isinstance(elt.slice, ast.Constant):
            key = key_of(elt.value)
            if key:
                out.append((key, node.value, "store"))  # type: ignore[attr-defined]
    return out


def element_store(node: ast.AST, ctx: Context) -> ElementStore | None:
    """The store, if ``node`` keeps a value in a container that outlives the iterations of
    the innermost loop, and that loop differentiates an element of it."""
    if not ctx.loops:
        return None
    for key, value, how in _stored(node):
        if _graph_free(value):
            continue
        loops = ctx.persistent_loops(key)
        if not loops or loops[-1] is not ctx.loops[-1]:
            continue
        call = _differentiated_element(key, ctx.loops[-1])
        if call is None or _whole(key, ctx):
            continue
        return ElementStore(key, value, how, call)
    return None


def differentiated_sibling(value: ast.expr, ctx: Context
                           ) -> tuple[ast.Subscript, ast.Call] | None:
    """The element and the ``xs[j].backward()`` call of an enclosing loop when ``value``
    is, or scales, an element ``xs[i]`` of the same container (``a * losses[1]``), ``xs``
    being bound in that loop."""
    while type(value) in (ast.BinOp, ast.UnaryOp):
        if type(value) is ast.UnaryOp:
            value = value.operand  # type: ignore[attr-defined]
            continue
        subs = [p for p in (value.left, value.right)  # type: ignore[attr-defined]
                if type(p) in (ast.Subscript, ast.BinOp, ast.UnaryOp)]
        if len(subs) != 1:
            return None
        value = subs[0]
    if type(value) is not ast.Subscript:
        return None
    key = key_of(value.value)
    if not key or _whole(key, ctx):
        return None
    for loop in ctx.loops:
        call = _differentiated_element(key, loop)
        if call is not None and key in loop.facts.assigned:
            return value, call
    return None
