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

__all__ = ["FIELDS", "all_statements", "body_fields", "child_nodes", "fields", "scope_nodes",
           "walk"]

#: fields that never hold a node worth visiting (operators, contexts, plain values)
_SKIP_FIELDS = frozenset({"ctx", "type_comment", "op", "ops", "attr", "id", "arg", "kind",
                          "conversion", "level", "is_async", "simple", "name", "names",
                          "module", "asname", "rest", "kwd_attrs", "tag"})
#: node class -> :func:`fields` of it, filled as classes are met (read it directly in hot
#: loops: ``FIELDS.get(cls) or fields(cls)``)
FIELDS: dict[type, tuple[str, ...]] = {}


#: classes whose ``value`` is a plain constant, not a node
_CONSTANTS = (ast.Constant, getattr(ast, "MatchSingleton", ast.Constant))


def fields(cls: type) -> tuple[str, ...]:
    """The fields of node class ``cls`` that may hold expressions or statements: each holds
    a node, ``None`` or a list of those (never a plain value)."""
    out = FIELDS.get(cls)
    if out is None:
        out = () if cls in _CONSTANTS else tuple(
            f for f in cls._fields if f not in _SKIP_FIELDS)  # type: ignore[attr-defined]
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
#: node class -> the fields of :data:`_BODIES` it has
_BODIES_OF: dict[type, tuple[str, ...]] = {}


def body_fields(cls: type) -> tuple[str, ...]:
    """The fields of node class ``cls`` that hold statements, except handlers or match
    cases (``body``, ``orelse``, ``finalbody``, ``handlers``, ``cases``; none for a simple
    statement or an expression)."""
    names = _BODIES_OF.get(cls)
    if names is None:
        names = _BODIES_OF[cls] = tuple(n for n in _BODIES if n in getattr(cls, "_fields", ()))
    return names


def all_statements(node: ast.AST) -> list[ast.AST]:
    """Every statement under ``node`` at any depth, nested functions and classes included
    (what ``ast.walk`` finds of them, without visiting a single expression)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [node]
    bodies_of = _BODIES_OF.get
    stmt = ast.stmt
    while todo:
        sub = todo.pop()
        cls = sub.__class__
        names = bodies_of(cls)
        if names is None:
            names = _BODIES_OF[cls] = tuple(
                n for n in _BODIES if n in getattr(cls, "_fields", ()))
        for name in names:  # none for the simple statements
            block = getattr(sub, name, None)
            if block.__class__ is list:
                for item in block:
                    if isinstance(item, stmt):
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


#: fields that hold plain values (names, strings, flags, numbers), never a node
_VALUE_FIELDS = frozenset({"type_comment", "attr", "id", "arg", "kind", "conversion", "level",
                           "is_async", "simple", "name", "module", "asname", "rest",
                           "kwd_attrs", "tag"})
#: node class -> the fields :func:`walk` reads (every field that can hold a node)
_WALK_FIELDS: dict[type, tuple[str, ...]] = {}


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``, faster: the same nodes in the same (breadth-first) order, contexts and
    operators included, without its two nested generators per node and the import that
    ``ast.walk`` runs at each call."""
    AST = ast.AST
    walk_fields = _WALK_FIELDS
    todo = [node]
    push = todo.append
    for node in todo:  # the list grows while it is read: a queue, never shifted
        cls = node.__class__
        names = walk_fields.get(cls)
        if names is None:
            names = walk_fields[cls] = tuple(
                f for f in cls._fields if f not in _VALUE_FIELDS)  # type: ignore[attr-defined]
        for name in names:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(value, AST):
                push(value)
        yield node
