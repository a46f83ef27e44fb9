"""From a statement that only rebinds a container to the statement that fills it.

The culprit's own statement is sometimes a plain rebinding from another name: a trainer
keeps what a tester built (``self.results_te = test.results``), a method publishes its
local (``self.results = results``). Nothing is added there, so neither the line nor a
fix belongs to it: what is kept was added where the other name was filled
(``results[name][state] = metric(net, g, y)``).

:func:`filled_from` follows such a rebinding, statically, from the source only:

* ``x = name``: the statements that fill ``name`` in the same function;
* ``x = obj.attr``: every binding of ``obj`` in the same function must be a call of one
  class of the user's files (``test = Test(...)``); the statements that fill
  ``self.attr`` in that class's methods;

and again from what it finds when that is itself a plain rebinding (at most
:data:`MAX_HOPS`). It returns the statement that adds (append-like, ``x[k] = v``,
``+=``), never an initialisation, or None when the trail is ambiguous (the object's
class unknown, no adding statement): the caller keeps its own line then.
"""

from __future__ import annotations

import ast

from torchmem.doctor.source import Statement, find_statements, load_tree
from torchmem.doctor.statement_rank import best_statement

__all__ = ["filled_from", "MAX_HOPS"]

#: plain rebindings followed at most
MAX_HOPS = 3

_ADDING = ("add", "setitem", "augassign")


_Func = ast.FunctionDef | ast.AsyncFunctionDef


def _function_node(tree: ast.Module, line: int) -> _Func | None:
    best: _Func | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    return best


def _class_of(func: _Func, name: str) -> str | None:
    """The class ``name`` is bound to in ``func``: every binding of it there is a call
    of that one class (``test = Test(...)``); None otherwise."""
    bound = [n.value for n in ast.walk(func) if isinstance(n, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
    classes = {b.func.id if isinstance(b, ast.Call) and isinstance(b.func, ast.Name) else None
               for b in bound}
    if len(classes) != 1:
        return None
    return classes.pop()


def _class_span(files: list[str], name: str) -> tuple[str, int, int] | None:
    found = []
    for file in dict.fromkeys(files):
        parsed = load_tree(file)
        if parsed is None:
            continue
        for node in ast.walk(parsed[0]):
            if isinstance(node, ast.ClassDef) and node.name == name:
                found.append((file, node.lineno, node.end_lineno or node.lineno))
    return found[0] if len(found) == 1 else None


def _one_hop(stmt: Statement, files: list[str]) -> list[Statement]:
    """The statements that fill what ``stmt`` rebinds its target to."""
    parsed = load_tree(stmt.file)
    if parsed is None or stmt.value is None:
        return []
    try:
        value = ast.parse(stmt.value, mode="eval").body
    except SyntaxError:
        return []
    func = _function_node(parsed[0], stmt.line)
    if isinstance(value, ast.Name):
        return [s for s in find_statements(value.id, [stmt.file])
                if s.function == stmt.function and func is not None
                and func.lineno <= s.line <= (func.end_lineno or func.lineno)]
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and func is not None:
        cls = _class_of(func, value.value.id)
        span = _class_span(files, cls) if cls else None
        if span is None:
            return []
        file, first, last = span
        return [s for s in find_statements(f"self.{value.attr}", [file])
                if first <= s.line <= last and (s.target or "").startswith("self.")]
    return []


def filled_from(stmt: Statement, files: list[str]) -> Statement | None:
    """The statement that adds to what ``stmt`` (a plain rebinding) binds, or None."""
    current = stmt
    for _ in range(MAX_HOPS):
        if current.kind != "rebind":
            return None
        found = _one_hop(current, files)
        nxt = best_statement(found, "container")
        if nxt is None:
            return None
        if nxt.kind in _ADDING and (nxt.value or "") not in ("[]", "{}", "()"):
            return nxt
        current = nxt
    return None
