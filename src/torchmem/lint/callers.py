"""The grad mode of a function's callers: functions of a file that only ever run under
``torch.no_grad()`` (no torch).

``validate(loader, net)`` is written without ``no_grad``, but ``main()`` calls it inside
``with torch.no_grad():``. Judging ``validate`` on its own reports its forward passes as
recording a graph; its callers say otherwise. :func:`no_grad_functions` finds the
functions and methods of one file whose every call in that file is made with autograd
recording off (inside a ``no_grad``/``inference_mode`` block, or from a function that is
itself decorated so or only called so), so the engine walks them as ``no_grad`` functions.

Calls resolved: ``name(...)`` to a top-level function, ``self.name(...)`` to every method of
that name in the classes of the file (a base class may call a subclass's override). A
function that is never called in the file, or whose name is also used
as a value (a callback, ``map(fn, ...)``, ``step(closure)``), keeps its own grad mode: its
callers are unknown.
"""

from __future__ import annotations

import ast
from typing import Callable

from torchmem.lint.children import FIELDS, all_statements, child_nodes, fields, walk
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import NO_GRAD_CONTEXTS, is_no_grad_decorator

__all__ = ["file_functions", "no_grad_functions", "mentions_no_grad"]

_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
#: (None, name) for a top-level function; ("self", name) for the methods of that name of
#: every class of the file (a call ``self.name()`` may reach a subclass's override)
_Key = tuple[str | None, str]


def mentions_no_grad(source: str | bytes) -> bool:
    """Whether a file's text can hold a ``no_grad`` block or decorator at all (the
    analysis below is skipped for the many files that cannot)."""
    if isinstance(source, bytes):
        return b"no_grad" in source or b"inference_mode" in source
    return "no_grad" in source or "inference_mode" in source


def file_functions(tree: ast.Module) -> dict[_Key, list[ast.AST]]:
    """The functions a call in the file can reach: ``(None, name)`` for the top-level
    functions, ``("self", name)`` for the methods of that name of every class."""
    defs: dict[_Key, list[ast.AST]] = {}
    for stmt in tree.body:
        if isinstance(stmt, _FUNC_TYPES):
            defs.setdefault((None, stmt.name), []).append(stmt)
        elif isinstance(stmt, ast.ClassDef):
            for sub in stmt.body:
                if isinstance(sub, _FUNC_TYPES):
                    defs.setdefault(("self", sub.name), []).append(sub)
    return defs


def no_grad_functions(tree: ast.Module, qualname: Callable[[ast.AST], str | None],
                      outside: frozenset[str] = frozenset()) -> frozenset[int]:
    """``id()`` of every function/method node of ``tree`` whose calls in the file all run
    with autograd recording off (call it only when :func:`mentions_no_grad` or with
    ``outside``): ``outside`` names top-level functions that the other files of the tree
    call only under ``no_grad`` (:func:`torchmem.lint.tree_callers.no_grad_callees`), as
    calls made with recording off."""
    defs = file_functions(tree)
    if not defs:
        return frozenset()

    def is_no_grad(expr: ast.expr) -> bool:
        func = expr.func if type(expr) is ast.Call else expr
        return qualname(func) in NO_GRAD_CONTEXTS

    if not outside and not _seeded(tree, defs, is_no_grad, qualname):
        return frozenset()  # no call of them is made with recording off: none is quiet

    # calls[key] = list of (caller key, under a no_grad block)
    calls: dict[_Key, list[tuple[_Key | None, bool]]] = {
        (None, name): [(None, True)] for name in outside if (None, name) in defs}
    escaped: set[_Key] = set()
    decorated: set[_Key] = set()

    # one walk, each node once; a stack of (node, caller, class name, under no_grad); the
    # names and constants among the children of a node are handled as they are met
    todo: list[tuple[ast.AST, _Key | None, str | None, bool]] = [(tree, None, None, False)]
    push = todo.append
    Name, Constant, NoneType = ast.Name, ast.Constant, type(None)
    fields_of = FIELDS.get
    while todo:
        node, caller, cls, no_grad = todo.pop()
        t = type(node)
        if t is Name:
            if (None, node.id) in defs:  # type: ignore[attr-defined]
                escaped.add((None, node.id))  # type: ignore[attr-defined]  # used as a value
            continue
        if t is Constant:
            continue
        if t in _FUNC_TYPES:
            key = ("self" if cls else None, node.name)  # type: ignore[attr-defined]
            inner = key if any(d is node for d in defs.get(key, ())) else caller
            if inner is key and any(is_no_grad_decorator(qualname(
                    d.func if type(d) is ast.Call else d) or key_of(
                    d.func if type(d) is ast.Call else d))
                    for d in node.decorator_list):  # type: ignore[attr-defined]
                decorated.add(key)
            inner_no_grad = False if inner is key else no_grad
            for child in child_nodes(node):
                push((child, inner, cls, inner_no_grad))
            continue
        if t is ast.ClassDef:
            for child in child_nodes(node):
                push((child, caller, node.name, no_grad))  # type: ignore[attr-defined]
            continue
        if t is ast.With or t is ast.AsyncWith:
            on = no_grad or any(is_no_grad(i.context_expr) for i in node.items)  # type: ignore[attr-defined]
            for item in node.items:  # type: ignore[attr-defined]
                push((item, caller, cls, no_grad))
            for stmt in node.body:  # type: ignore[attr-defined]
                push((stmt, caller, cls, on))
            continue
        if t is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            key = _callee_key(func, cls)
            if key is not None and key in defs:
                calls.setdefault(key, []).append((caller, no_grad))
                for arg in node.args:  # type: ignore[attr-defined]
                    push((arg, caller, cls, no_grad))
                for kw in node.keywords:  # type: ignore[attr-defined]
                    push((kw.value, caller, cls, no_grad))
                if type(func) is ast.Attribute:
                    push((func.value, caller, cls, no_grad))
                continue
        elif t is ast.Attribute:
            key = _callee_key(node, cls)  # type: ignore[arg-type]
            if key is not None and key in defs:
                escaped.add(key)  # used as a value: called from places we cannot see
        for field in fields_of(t) or fields(t):  # child_nodes(node), inline
            value = getattr(node, field)
            for child in value if value.__class__ is list else (value,):
                c = child.__class__
                if c is Name:
                    if (None, child.id) in defs:
                        escaped.add((None, child.id))  # used as a value
                elif c is not Constant and c is not NoneType:
                    push((child, caller, cls, no_grad))

    quiet: set[_Key] = set(decorated)
    changed = True
    while changed:
        changed = False
        for key, sites in calls.items():
            if key in quiet or key in escaped or not sites:
                continue
            if all(ng or (c is not None and c in quiet) for c, ng in sites):
                quiet.add(key)
                changed = True
    return frozenset(id(d) for k in quiet if k not in decorated for d in defs[k])


def _decorated_no_grad(node: ast.AST, qualname: Callable[[ast.AST], str | None]) -> bool:
    return any(is_no_grad_decorator(qualname(d.func if type(d) is ast.Call else d) or key_of(
        d.func if type(d) is ast.Call else d)) for d in node.decorator_list)  # type: ignore[attr-defined]


def _seeded(tree: ast.Module, defs: dict[_Key, list[ast.AST]],
            is_no_grad: Callable[[ast.expr], bool],
            qualname: Callable[[ast.AST], str | None]) -> bool:
    """Whether a function of the file is called where recording is off: in the body of a
    ``with`` statement that turns it off, or in a function whose key is decorated so (the
    key ``("self", name)`` stands for every method of that name). Without such a call no
    function of the file is only called with recording off, and the walk of every
    expression below is skipped (most files that mention ``no_grad`` make none)."""
    regions: list[ast.AST] = []
    for stmt in all_statements(tree):
        t = type(stmt)
        if (t is ast.With or t is ast.AsyncWith) and any(
                is_no_grad(i.context_expr) for i in stmt.items):  # type: ignore[attr-defined]
            regions.extend(stmt.body)  # type: ignore[attr-defined]
    for nodes in defs.values():
        if any(n.decorator_list and _decorated_no_grad(n, qualname) for n in nodes):  # type: ignore[attr-defined]
            regions.extend(nodes)  # their decorators and defaults run in them too
    Call, Name, Attribute = ast.Call, ast.Name, ast.Attribute
    for region in regions:
        for node in walk(region):
            if type(node) is Call:
                func = node.func  # type: ignore[attr-defined]
                t = type(func)
                if t is Name and (None, func.id) in defs or t is Attribute and \
                        type(func.value) is Name and func.value.id == "self" and \
                        ("self", func.attr) in defs:
                    return True
    return False


def _callee_key(func: ast.expr, cls: str | None) -> _Key | None:
    if type(func) is ast.Name:
        return (None, func.id)  # type: ignore[attr-defined]
    if type(func) is ast.Attribute and type(func.value) is ast.Name and \
            func.value.id == "self" and cls is not None:  # type: ignore[attr-defined]
        return ("self", func.attr)  # type: ignore[attr-defined]
    return None
