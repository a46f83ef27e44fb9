"""Joining the environments of the branches of an ``if`` (no torch).

Value kinds are *must* facts: after an ``if``, a name holds a graph tensor only when it
does on every path. Two kinds of path say nothing about the name, and are left out of the
join:

- a branch that never binds a name bound nowhere else in the function: reading the name
  after the ``if`` on that path raises ``NameError``, so whatever reads it got the value
  of a branch that bound it (``if ...: ... else: loss = criterion(out, y)``);
- a branch that binds the name to ``None`` only (``loss = None`` when nothing is
  predicted): ``None`` holds no tensor, so a value kept on that path keeps nothing.

Only plain local names (not parameters, not attributes) are treated so.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import child_nodes
from torchmem.lint.kinds import TYPE, VALUE, meet

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["join_branches"]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCRATCH = "joins.stores"
#: at most this many names are reconsidered per join (keeps long elif chains linear)
_MAX_KEYS = 16


def _index(ctx: Context) -> dict[str, list[tuple[int, bool]]]:
    """``name -> [(line, bound to None)]`` for every binding of a plain name in the current
    function (own scope only), computed once per function."""
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    node = ctx.fn.node
    found = memo.get(id(node))
    if found is not None:
        return found
    found = {}
    nones: set[int] = set()
    todo: list[ast.AST] = list(getattr(node, "body", []))
    while todo:
        sub = todo.pop()
        t = type(sub)
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and \
                type(sub.targets[0]) is ast.Name and type(sub.value) is ast.Constant and \
                sub.value.value is None:
            nones.add(id(sub.targets[0]))  # type: ignore[attr-defined]
        elif t is ast.Name and type(sub.ctx) is ast.Store:  # type: ignore[attr-defined]
            found.setdefault(sub.id, []).append((sub.lineno, id(sub) in nones))  # type: ignore[attr-defined]
        if t in _SCOPES:
            continue
        todo.extend(child_nodes(sub))
    memo[id(node)] = found
    return found


def _in_body(line: int, body: list[ast.stmt]) -> bool:
    return bool(body) and body[0].lineno <= line <= (body[-1].end_lineno or body[-1].lineno)


def join_branches(ends: list[tuple[list[ast.stmt], dict[str, int]]],
                  ctx: Context) -> dict[str, int]:
    """The environment after the branches ``(body, environment at its end)`` of an ``if``."""
    env = ends[0][1]
    for _, other in ends[1:]:
        env = meet(env, other)
    if len(ends) < 2:
        return env
    keys: set[str] = set()
    for _, e in ends:
        keys.update(k for k, v in e.items() if v & VALUE and "." not in k)
    keys -= {k for k in keys if env.get(k, 0) & VALUE}
    params = ctx.fn.facts.params
    keys = {k for k in keys if k not in params}
    if not keys or len(keys) > _MAX_KEYS:
        return env
    index = _index(ctx)
    for key in keys:
        stores = index.get(key, [])
        per_branch = [[none for line, none in stores if _in_body(line, body)]
                      for body, _ in ends]
        inside = sum(len(b) for b in per_branch)
        informed = []
        for (_, e), bound in zip(ends, per_branch):
            if bound and all(bound) or not bound and inside == len(stores):
                continue  # None only, or unbound on this path
            informed.append(e.get(key, 0))
        if not informed or len(informed) == len(ends):
            continue
        v = informed[0]
        for other_kind in informed[1:]:
            v = (v & other_kind & VALUE) | ((v | other_kind) & TYPE)
        if v & VALUE:
            env[key] = v | (env.get(key, 0) & TYPE)
    return env
