"""An object that holds a chain of graphs: the attribute its own method keeps rebinding.

A running statistic is often an object (``AverageMeter``) whose method rebinds a tensor
attribute from its own previous value and what it is handed (``self.sum += val * n``):
when ``val`` carries a graph, every call chains one more graph onto ``self.sum``. The
walk names paths only down to a few hops (``self.stats['train']['Loss/l2']``, the meter),
so the growing path found is the object; the line that grows it is neither where the
object was made nor where it is handed each value, but the method's rebinding.

:func:`chained_attribute` finds it from two facts: the attributes of the object that held
a tensor with a ``grad_fn`` at the last snapshot (:attr:`PathStats.graph_attrs`, plain
data recorded by the walk), and the statements of the object's class that rebind one of
those attributes from its own value (``self.a += ...``, ``self.a = f(self.a, ...)``). When
exactly one attribute has such statements, the culprit is that attribute
(``self.stats['train']['Loss/l2'].sum``) at that statement; otherwise nothing changes
(another attribute rebound from it, ``self.avg = self.sum / self.count``, holds the same
chain but does not make it).
"""

from __future__ import annotations

import ast

from torchmem.doctor.call_sites import _enclosing
from torchmem.doctor.pathstats import PathStats
from torchmem.doctor.source import Statement, find_statements, load_tree, stem
from torchmem.doctor.statement_rank import best_statement

__all__ = ["chained_attribute"]

#: statement kinds that rebind a name from its own value (see :class:`Statement`)
_CHAINING = ("augassign", "assign")


def _own_rebinding(stmt: Statement, attr: str, class_name: str) -> bool:
    """Whether ``stmt`` is ``self.<attr> ...`` in a method of the class ``class_name``."""
    if stmt.kind not in _CHAINING or not stmt.target:
        return False
    try:
        target = stem(ast.parse(stmt.target, mode="eval").body)
    except SyntaxError:
        return False
    if target != ["self", attr]:
        return False
    parsed = load_tree(stmt.file)
    if parsed is None:
        return False
    _, cls = _enclosing(parsed[0], stmt.line)
    return cls is not None and cls.name == class_name


def chained_attribute(path: str, stats: PathStats, files: list[str]) -> tuple[str, Statement] | None:
    """(``path.attr``, the statement) for the one attribute of the object at ``path`` that
    held a graph and that a method of its class rebinds from its own value; None when
    ``path`` is a container, held no such attribute, or more than one attribute (or none)
    is rebound so."""
    if stats.items is not None or not stats.graph_attrs:
        return None
    found: list[tuple[str, list[Statement]]] = []
    for attr in dict.fromkeys(stats.graph_attrs):
        stmts = [s for s in find_statements(f"{path}.{attr}", files)
                 if _own_rebinding(s, attr, stats.type)]
        if stmts:
            found.append((attr, stmts))
    if len(found) != 1:
        return None
    attr, stmts = found[0]
    best = best_statement(stmts, "sum")
    return (f"{path}.{attr}", best) if best is not None else None


def chained_text(path: str, name: str, stmt: Statement, stats: PathStats) -> tuple[str, str]:
    """(evidence line, advice) for a culprit named by :func:`chained_attribute`."""
    held = ", ".join(f"`{a}`" for a in dict.fromkeys(stats.graph_attrs))
    attr = name[len(path) + 1:]
    evidence = (f"`{path}` is an instance of `{stats.type}` whose attributes {held} hold tensors with "
                f"graphs; `{stmt.code}` (line {stmt.line}, in `{stmt.function}`) rebinds "
                f"`{attr}` from its own value at every call, chaining each call's graph onto "
                f"the previous ones")
    advice = (f"keep a number (`.item()`) or a detached tensor in `{name}`: convert what "
              f"`{stmt.code}` (line {stmt.line}) adds, or the value where it is handed in; "
              f"no one-line edit: `{stmt.function}` may also be given plain numbers")
    return evidence, advice
