"""Variables whose size merely varies from step to step: they are bound afresh, not grown.

Two snapshots of ``x = torch.randn(batch, 512)`` with a random ``batch`` differ by the
sizes of two unrelated values; two in a row can both be larger than the one before. The
trend of such a variable is not accumulation, and :func:`rebound_fresh` says so from the
statements that bind it and from what the snapshots saw die:

* every statement binding it is a plain rebinding that does not read its old value; or
* it is a local of a function (not of the module) whose own statements bind it outside
  any loop of that function, or that only receives it as a parameter: each call starts it
  afresh (``x = x[:, [2, 1, 0]]`` reads the value bound earlier in the same call, never an
  earlier step's). A value carried from step to step through the parameter is the
  caller's variable, judged at the caller's statement.

``x = torch.cat([x, new])`` in the loop that runs the steps reads the old value and still
counts; so does anything whose graph grows, or whose earlier content is still alive.
"""

from __future__ import annotations

import ast
from typing import Sequence

from torchmem.doctor.culprit import PathStats
from torchmem.doctor.source import Statement, find_statements, load_tree
from torchmem.doctor.source_flow import function_parameters

__all__ = ["rebound_fresh"]


def rebound_fresh(stats: PathStats, graphs: bool) -> bool:
    """True for a variable rebound to a fresh value each step whose size merely varies
    (see the module's docstring). ``graphs``: its growth includes autograd graphs, which
    a fresh value cannot bring."""
    if stats.items is not None or stats.kind in ("grad", "hook", "closure") or graphs:
        return False
    if stats.survived is None or stats.survived > 0:
        return False
    files = [f for f in (stats.owner_file, stats.file) if f]
    found = find_statements(stats.path, files)
    if stats.depth == 0 and stats.kind == "local" and stats.function:
        # a local is bound by its own function's statements; a same-named local of
        # another function (`x = self.embed(x)` in `forward`) is another variable
        own = [s for s in found if s.function == stats.function]
        if _fresh_each_call(stats, own):
            return True
        found = own or found
    # an in-place update (`x.clamp_(0)`) changes the value it was just bound to: no binding
    found = [s for s in found if s.kind != "inplace"]
    return bool(found) and all(s.kind == "rebind" for s in found)


def _fresh_each_call(stats: PathStats, own: Sequence[Statement]) -> bool:
    """A local of a function other than the module whose own statements all sit outside
    the function's loops, or which no statement of its function binds and which is one of
    its parameters: nothing keeps its value from one call to the next."""
    if stats.function in (None, "<module>") or stats.file is None:
        return False
    if own:
        return not any(s.in_loop for s in own)
    return _parameter_only(stats.file, stats.function, stats.path)


def _parameter_only(file: str, function: str, name: str) -> bool:
    """Whether every function named ``function`` in ``file`` takes ``name`` as a parameter
    and binds it nowhere in its body (a loop variable, a tuple target, ``with ... as``)."""
    parsed = load_tree(file)
    if parsed is None:
        return False
    defs = [n for n in ast.walk(parsed[0]) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name == function]
    return bool(defs) and all(name in function_parameters(d) and not _bound_in_body(d, name)
                              for d in defs)


def _bound_in_body(d: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    for stmt in d.body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)):
                return True
            if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
                return True
    return False
