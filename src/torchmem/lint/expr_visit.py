"""The expression half of the lint walk: every expression node once, in source order.

:class:`~torchmem.lint.walker.Walker` drives statements; this visitor dispatches each
expression node to the selected rules' handlers and descends into its children, reading
the commonest nodes' fields directly and skipping leaves no rule handles. No torch.
"""

from __future__ import annotations

import ast
from typing import Callable

from torchmem.lint.children import FIELDS, fields
from torchmem.lint.context import Context

__all__ = ["expression_visitor"]


def expression_visitor(nodes: dict[type, list[Callable[..., None]]], ctx: Context
                       ) -> tuple[Callable[[ast.AST], None], Callable[[], None]]:
    """The expression visitor, built as a closure (locals are faster than attributes),
    and the function that releases it (the closure calls itself: a reference cycle)."""
    get_handlers = nodes.get
    fields_of = FIELDS.get
    Name, Constant = ast.Name, ast.Constant
    #: leaves no rule handles: not worth a call (a third of all nodes are names); and
    #: ``None`` (an absent child): the fields read hold nothing else but nodes
    quiet_leaves = frozenset(c for c in (Name, Constant, type(None))
                             if c not in nodes)
    Lambda, NamedExpr = ast.Lambda, ast.NamedExpr
    Attribute, Call = ast.Attribute, ast.Call
    #: a keyword argument no rule handles is not visited itself, only its value
    quiet_keywords = ast.keyword not in nodes

    def expr(node: ast.AST) -> None:
        """Dispatch every expression node once, in source order."""
        cls = node.__class__
        handlers = get_handlers(cls)
        if handlers:
            for h in handlers:
                h(node, ctx)
        if cls is Name or cls is Constant:
            return
        # the commonest nodes with children, their fields read directly (same order)
        if cls is Attribute:
            value = node.value  # type: ignore[attr-defined]
            if value.__class__ not in quiet_leaves:
                expr(value)
            return
        if cls is Call:
            value = node.func  # type: ignore[attr-defined]
            if value.__class__ not in quiet_leaves:
                expr(value)
            for item in node.args:  # type: ignore[attr-defined]
                if item.__class__ not in quiet_leaves:
                    expr(item)
            for item in node.keywords:  # type: ignore[attr-defined]
                if not quiet_keywords:
                    expr(item)
                elif item.value.__class__ not in quiet_leaves:
                    expr(item.value)
            return
        if cls is NamedExpr:
            expr(node.value)  # type: ignore[attr-defined]
            ctx.fn.flow.bind(node.target, ctx.kind(node.value))  # type: ignore[attr-defined]
            return
        if cls is Lambda:
            expr(node.body)  # type: ignore[attr-defined]
            return
        for name in fields_of(cls) or fields(cls):
            value = getattr(node, name)
            if value.__class__ is list:
                for item in value:
                    if item.__class__ not in quiet_leaves:
                        expr(item)
            elif value.__class__ not in quiet_leaves:
                expr(value)

    def release() -> None:
        nonlocal expr, ctx
        expr = ctx = None  # type: ignore[assignment]

    return expr, release
