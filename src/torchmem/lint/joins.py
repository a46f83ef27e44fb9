"""Joining the environments of the branches of an ``if`` (no torch).

Value kinds are *must* facts: after an ``if``, a name holds a graph tensor only when it
does on every path. Two kinds of path say nothing about the name, and are left out of the
join:

- a branch that never binds a name bound nowhere else in the function: reading the name
  after the ``if`` on that path raises ``NameError``, so whatever reads it got the value
  of a branch that bound it (``if ...: ... else: loss = criterion(out, y)``);
- a branch that binds the name to ``None`` or a number only (``loss = None`` when nothing
  is predicted, ``adv_loss = 0.0`` when the discriminator does not train yet): neither
  holds a tensor, so a value kept on that path keeps nothing. So does a branch that does
  not bind the name when every binding of it outside the ``if`` is such a constant
  (``adv_loss = 0.0`` before ``if step > start: adv_loss = criterion(...)``).

A loop joins the same way (:func:`join_loop`): when every binding of a name before the
loop is ``None`` or a number (``tot_loss = 0.`` before ``for ...: tot_loss = tot_loss +
loss``), the path that skips the loop says nothing about it, so after the loop the name
holds what the body left in it. And a name that holds a graph tensor before a loop whose
body only adds to it (``adv_loss += w * term``, ``-=``, ``*=``, ``/=``) still holds one
after it, whatever the terms are: the sum keeps the graph of the first operand.

Only plain local names (not parameters, not attributes) are treated so.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import child_nodes
from torchmem.lint.kinds import GRAPH, TYPE, VALUE, meet

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["join_branches", "join_loop"]

#: ``except*`` (Python 3.11), compared by identity
_TRY_STAR = getattr(ast, "TryStar", None)

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCRATCH = "joins.stores"
#: at most this many names are reconsidered per join (keeps long elif chains linear)
_MAX_KEYS = 16


def _constant(value: ast.expr) -> bool:
    """``None`` or a number (``0``, ``0.0``, ``-1.0``): a value that holds no tensor."""
    if type(value) is ast.UnaryOp and type(value.op) is ast.USub:  # type: ignore[attr-defined]
        value = value.operand  # type: ignore[attr-defined]
    if type(value) is not ast.Constant:
        return False
    v = value.value  # type: ignore[attr-defined]
    return v is None or type(v) in (int, float)


#: how a binding binds its name: to a plain value, a constant, or folding into it (``x += y``)
_PLAIN, _CONST, _FOLD = 0, 1, 2
_FOLD_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _index(ctx: Context) -> dict[str, list[tuple[int, int]]]:
    """``name -> [(line, how)]`` for every binding of a plain name in the current function
    (own scope only; ``how`` is :data:`_PLAIN`, :data:`_CONST` or :data:`_FOLD`), computed
    once per function."""
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    node = ctx.fn.node
    found = memo.get(id(node))
    if found is not None:
        return found
    body = getattr(node, "body", [])
    if ":=" not in ctx.source:  # no assignment expression: the bindings are statements'
        found = _statement_bindings(body)
        if found is not None:
            memo[id(node)] = found
            return found
    found = {}
    how: dict[int, int] = {}
    todo: list[ast.AST] = list(body)
    while todo:
        sub = todo.pop()
        t = type(sub)
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and \
                type(sub.targets[0]) is ast.Name and _constant(sub.value):
            how[id(sub.targets[0])] = _CONST
        elif isinstance(sub, ast.AugAssign) and type(sub.target) is ast.Name and \
                isinstance(sub.op, _FOLD_OPS):
            how[id(sub.target)] = _FOLD
        elif t is ast.Name and type(sub.ctx) is ast.Store:  # type: ignore[attr-defined]
            found.setdefault(sub.id, []).append(  # type: ignore[attr-defined]
                (sub.lineno, how.get(id(sub), _PLAIN)))  # type: ignore[attr-defined]
        if t in _SCOPES:
            continue
        todo.extend(child_nodes(sub))
    memo[id(node)] = found
    return found


#: statements that bind no name, or bind one that is no ``ast.Name`` (an import alias, an
#: ``except ... as`` name), or hold the bodies :func:`_statement_bindings` walks
_NO_TARGETS = frozenset({ast.Expr, ast.Return, ast.If, ast.While, ast.Try, ast.Raise,
                         ast.Assert, ast.Delete, ast.Pass, ast.Break, ast.Continue,
                         ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Match,
                         getattr(ast, "TryStar", ast.Try)})
_BODIES = ("body", "orelse", "finalbody")


def _target_names(target: ast.AST, out: list[ast.Name]) -> None:
    """The names a target binds (``a``, ``a, (b, *c)``; not ``a.x`` or ``a[i]``)."""
    t = type(target)
    if t is ast.Name:
        out.append(target)  # type: ignore[arg-type]
    elif t is ast.Tuple or t is ast.List:
        for elt in target.elts:  # type: ignore[attr-defined]
            _target_names(elt, out)
    elif t is ast.Starred:
        _target_names(target.value, out)  # type: ignore[attr-defined]


def _statement_bindings(body: list[ast.stmt]) -> dict[str, list[tuple[int, int]]] | None:
    """What :func:`_index` finds, read off the statements and their targets alone (valid
    when the code has no assignment expression, the one way an expression binds a name
    outside a comprehension); ``None`` for a statement it does not know."""
    found: dict[str, list[tuple[int, int]]] = {}
    todo: list[ast.AST] = list(body)
    while todo:
        sub = todo.pop()
        t = type(sub)
        names: list[ast.Name] = []
        how = _PLAIN
        if t is ast.Assign:
            targets = sub.targets  # type: ignore[attr-defined]
            if len(targets) == 1 and type(targets[0]) is ast.Name and _constant(
                    sub.value):  # type: ignore[attr-defined]
                how = _CONST
            for target in targets:
                _target_names(target, names)
        elif t is ast.AugAssign:
            if type(sub.target) is ast.Name and isinstance(sub.op, _FOLD_OPS):  # type: ignore[attr-defined]
                how = _FOLD
            _target_names(sub.target, names)  # type: ignore[attr-defined]
        elif t is ast.AnnAssign:
            _target_names(sub.target, names)  # type: ignore[attr-defined]
        elif t is ast.For or t is ast.AsyncFor:
            _target_names(sub.target, names)  # type: ignore[attr-defined]
        elif t is ast.With or t is ast.AsyncWith:
            for item in sub.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    _target_names(item.optional_vars, names)
        elif t in _SCOPES:
            continue
        elif t is ast.ExceptHandler or t is ast.match_case:
            todo.extend(sub.body)  # type: ignore[attr-defined]
            continue
        elif t not in _NO_TARGETS:
            return None  # a statement of a newer Python (``type X = ...``): walk it all
        for name in names:
            found.setdefault(name.id, []).append((name.lineno, how))
        for field in _BODIES:
            block = getattr(sub, field, None)
            if block:
                todo.extend(block)
        if t is ast.Try or t is ast.Match or t is _TRY_STAR:
            todo.extend(sub.handlers if t is not ast.Match else sub.cases)  # type: ignore[attr-defined]
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
        per_branch = [[how == _CONST for line, how in stores if _in_body(line, body)]
                      for body, _ in ends]
        inside = sum(len(b) for b in per_branch)
        outside = [how == _CONST for line, how in stores
                   if not any(_in_body(line, body) for body, _ in ends)]
        informed = []
        for (_, e), bound in zip(ends, per_branch):
            if bound and all(bound) or not bound and (inside == len(stores) or all(outside)):
                continue  # a constant only, or unbound on this path
            informed.append(e.get(key, 0))
        if not informed or len(informed) == len(ends):
            continue
        v = informed[0]
        for other_kind in informed[1:]:
            v = (v & other_kind & VALUE) | ((v | other_kind) & TYPE)
        if v & VALUE:
            env[key] = v | (env.get(key, 0) & TYPE)
    return env


def join_loop(body: list[ast.stmt], before: dict[str, int], after: dict[str, int],
              ctx: Context) -> dict[str, int]:
    """The environment after a loop whose ``body`` ran from ``before`` to ``after``: a name
    bound before the loop only to ``None`` or numbers keeps what the body left in it, and a
    graph tensor that the body only adds to (``adv_loss += w * term``) stays one."""
    env = meet(before, after)
    keys = [k for k in after.keys() | before.keys()
            if (after.get(k, 0) | before.get(k, 0)) & VALUE and "." not in k
            and not env.get(k, 0) & VALUE]
    if not keys or len(keys) > _MAX_KEYS:
        return env
    params = ctx.fn.facts.params
    index = _index(ctx)
    for key in keys:
        if key in params:
            continue
        stores = index.get(key, [])
        start = body[0].lineno if body else 0
        before_loop = [how == _CONST for line, how in stores if line < start]
        if after.get(key, 0) & VALUE and before_loop and all(before_loop):
            env[key] = after[key] | (env.get(key, 0) & TYPE)
        elif before.get(key, 0) & GRAPH and all(
                how == _FOLD for line, how in stores if _in_body(line, body)):
            env[key] = before[key] | (env.get(key, 0) & TYPE)
    return env
