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
from collections import Counter
from typing import TYPE_CHECKING

from torchmem.lint.kinds import TYPE, VALUE, meet

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["join_branches"]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCRATCH = "joins.stores"


def _stores(nodes: list[ast.stmt]) -> tuple[Counter[str], set[str]]:
    """How often each plain name is bound in ``nodes`` (own scope only), and the names
    whose every binding there is ``name = None``."""
    count: Counter[str] = Counter()
    other: set[str] = set()
    nones: set[str] = set()
    todo: list[ast.AST] = list(nodes)
    while todo:
        node = todo.pop()
        t = type(node)
        if t is ast.Name and type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
            count[node.id] += 1  # type: ignore[attr-defined]
        elif t is ast.Assign and len(node.targets) == 1 and \
                type(node.targets[0]) is ast.Name:  # type: ignore[attr-defined]
            name = node.targets[0].id  # type: ignore[attr-defined]
            value = node.value  # type: ignore[attr-defined]
            (nones if type(value) is ast.Constant and value.value is None else other).add(name)
        if t in _SCOPES and node not in nodes:
            continue
        todo.extend(ast.iter_child_nodes(node))
    for name in count:
        if name not in nones:
            other.add(name)
    return count, nones - other


def _function_stores(ctx: Context) -> Counter[str]:
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    node = ctx.fn.node
    found = memo.get(id(node))
    if found is None:
        body = getattr(node, "body", [])
        found = memo[id(node)] = _stores(body)[0]
    return found


def join_branches(ends: list[tuple[list[ast.stmt], dict[str, int]]],
                  ctx: Context) -> dict[str, int]:
    """The environment after the branches ``(body, environment at its end)`` of an ``if``."""
    env = ends[0][1]
    for _, other in ends[1:]:
        env = meet(env, other)
    if len(ends) < 2:
        return env
    keys = set()
    for _, e in ends:
        keys.update(k for k, v in e.items() if v & VALUE and "." not in k)
    keys -= {k for k in keys if env.get(k, 0) & VALUE}
    params = ctx.fn.facts.params
    keys = {k for k in keys if k not in params}
    if not keys:
        return env
    everywhere = _function_stores(ctx)
    per_branch = [_stores(body) for body, _ in ends]
    inside: Counter[str] = Counter()
    for count, _ in per_branch:
        inside.update(count)
    for key in keys:
        informed = []
        for (body, e), (count, nones) in zip(ends, per_branch):
            if key in nones or not count[key] and everywhere[key] == inside[key]:
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
