"""The child nodes of an AST node that can hold code, fast (no torch).

``ast.iter_child_nodes`` is a generator over every field and yields the ``Load``/``Store``
context and the operator of each node too: a third of the nodes it visits are such
markers. The walks of the linter want expressions and statements only, so they iterate a
per-class table of the fields worth visiting instead (about 40 % faster per walk on real
projects; ``benchmarks/lint_speed.py`` measures the whole linter).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

__all__ = ["FIELDS", "all_statements", "child_nodes", "fields", "scope_nodes"]

#: fields that never hold a node worth visiting (operators, contexts, plain values)
_SKIP_FIELDS = frozenset({"ctx", "type_comment", "op", "ops", "attr", "id", "arg", "kind",
                          "conversion", "level", "is_async", "simple", "name", "names",
                          "module", "asname"})
#: node class -> :func:`fields` of it, filled as classes are met (read it directly in hot
#: loops: ``FIELDS.get(cls) or fields(cls)``)
FIELDS: dict[type, tuple[str, ...]] = {}


def fields(cls: type) -> tuple[str, ...]:
    """The fields of node class ``cls`` that may hold expressions or statements."""
    out = FIELDS.get(cls)
    if out is None:
        out = tuple(f for f in cls._fields if f not in _SKIP_FIELDS)  # type: ignore[attr-defined]
        FIELDS[cls] = out
    return out


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """The direct children of ``node`` that are code (no contexts, operators or names)."""
    out: list[ast.AST] = []
    push = out.append
    for name in FIELDS.get(node.__class__) or fields(node.__class__):
        value = getattr(node, name)
        if value.__class__ is list:
            for item in value:
                if isinstance(item, ast.AST):
                    push(item)
        elif value is not None and isinstance(value, ast.AST):
            push(value)
    return out


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def all_statements(node: ast.AST) -> list[ast.AST]:
    """Every statement under ``node`` at any depth, nested functions and classes included
    (what ``ast.walk`` finds of them, without visiting a single expression)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [node]
    while todo:
        sub = todo.pop()
        for name in _BODIES:
            block = getattr(sub, name, None)
            if block.__class__ is list:
                for item in block:
                    if isinstance(item, ast.stmt):
                        out.append(item)
                    todo.append(item)  # an except handler or a match case holds a body
    return out


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def scope_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of ``body`` (contexts and operators included, as ``ast.walk`` yields
    them), not descending into nested functions, lambdas or classes: the code of one
    scope."""
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        yield node
        todo.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _SCOPES))
