"""The data flow :mod:`torchmem.doctor.source`'s statement finder follows, within a
function and into the functions a culprit is handed to.

* :func:`derived_names`: local names a function computes from the culprit (``new =
  step(old)``, ``new = mix(new, old)``), so that ``old = new`` is seen to carry the old
  value on, where ``old = base`` only starts a chain.
* :func:`handed_parameters`: the parameters of the files' functions that a call passes
  the culprit to (``decode(memory, i, feats)`` after ``memory = state['memory']``):
  what ``decode`` adds to its parameter (``memory[i] = out``) is added to the culprit,
  the same object. Followed through calls by name (a plain function, or a method called
  on any receiver, ``self`` skipped), up to :data:`MAX_HOPS` calls deep. A parameter is
  only an alias for what the function adds to it: rebinding it changes nothing of the
  caller's (the finder only counts additions through aliases).

Never imports torch.
"""

from __future__ import annotations

import ast
import functools
from typing import Callable, Sequence

__all__ = ["derived_names", "function_parameters", "handed_parameters", "own_nodes"]

#: calls followed from the culprit's own function into the functions it is handed to
MAX_HOPS = 3

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def function_parameters(d: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[str]:
    """Every parameter name of ``d``: positional, keyword-only, ``*args`` and ``**kwargs``."""
    a = d.args
    return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs,
                            *(v for v in (a.vararg, a.kwarg) if v))]


def own_nodes(body: Sequence[ast.AST]) -> list[ast.AST]:
    """The nodes of ``body``, not entering nested functions, classes or lambdas."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
                todo.append(child)
    return out


def _names(target: ast.AST) -> list[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts
                for n in _names(elt.value if isinstance(elt, ast.Starred) else elt)]
    return [target.id] if isinstance(target, ast.Name) else []


@functools.lru_cache(maxsize=4096)
def _assign_pairs(owner: ast.AST) -> tuple[tuple[tuple[str, ...], ast.AST], ...]:
    """(names bound, value) of the assignments of ``owner``'s own body (cached per node:
    parsed trees are cached per file and modification time)."""
    pairs = []
    for node in own_nodes(owner.body):  # type: ignore[attr-defined]
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = tuple(n for t in targets for n in _names(t))
            if names:
                pairs.append((names, node.value))
        elif isinstance(node, ast.NamedExpr):
            pairs.append(((node.target.id,), node.value))
    return tuple(pairs)


def derived_names(owner: ast.AST, reads: Callable[[ast.AST, frozenset[str]], bool],
                  own_name: str | None) -> frozenset[str]:
    """Plain local names of one function's body (``owner``: the function or the module)
    that some assignment there computes from the culprit, directly or through another
    such name (``reads(value, derived)`` says whether an expression reads the culprit or
    one of ``derived``). Flow-insensitive: a name counts when any of its assignments in
    the function reads the culprit. The culprit's own name (``own_name``) is not a
    temporary computed from it."""
    pairs = _assign_pairs(owner)
    derived: set[str] = set()
    changed = True
    while changed:
        changed = False
        for names, value in pairs:
            new = set(names) - derived - {own_name}
            if new and reads(value, frozenset(derived)):
                derived |= new
                changed = True
    return frozenset(derived)


@functools.lru_cache(maxsize=64)
def _scopes(tree: ast.Module) -> tuple[tuple[int, ast.AST, tuple[ast.Call, ...],
                                             tuple[tuple[str, ast.AST], ...]], ...]:
    """(key, node, its own calls, its ``name = <expr>`` bindings of an attribute, item or
    name) of the module (key 0) and of every function (its ``def`` line), cached per tree."""
    out = []
    for key, node in [(0, tree), *((n.lineno, n) for n in ast.walk(tree)
                                     if isinstance(n, _FUNCTIONS))]:
        nodes = own_nodes(node.body)  # type: ignore[attr-defined]
        calls = tuple(n for n in nodes if isinstance(n, ast.Call))
        binds = tuple((n.targets[0].id, n.value) for n in nodes
                      if isinstance(n, ast.Assign) and len(n.targets) == 1
                      and isinstance(n.targets[0], ast.Name)
                      and isinstance(n.value, (ast.Name, ast.Attribute, ast.Subscript)))
        out.append((key, node, calls, binds))
    return tuple(out)


def _callee(call: ast.Call) -> tuple[str, bool] | None:
    """The called function's name, and whether it is called as a method."""
    if isinstance(call.func, ast.Name):
        return call.func.id, False
    if isinstance(call.func, ast.Attribute):
        return call.func.attr, True
    return None


def handed_parameters(trees: dict[str, ast.Module], culprit: Callable[[ast.AST], bool],
                      local_to: str | None = None) -> dict[str, dict[int, set[str]]]:
    """file -> function (its ``def`` line) -> its parameters that a call in ``trees``
    passes the culprit to (``culprit(expr)`` says whether an expression is the culprit),
    directly, through a name bound to it, or through a parameter handed it in turn.
    ``local_to``: the culprit is a local variable of the function of that name, so only
    that function's own expressions are it (another function's variable of the same name
    is another object)."""
    defs: dict[str, list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]] = {}
    scopes: list[tuple[str, int, tuple[ast.Call, ...]]] = []
    bound: dict[tuple[str, int], set[str]] = {}
    direct: dict[tuple[str, int], Callable[[ast.AST], bool]] = {}
    for file, tree in trees.items():
        for key, node, calls, binds in _scopes(tree):
            name = node.name if isinstance(node, _FUNCTIONS) else "<module>"
            if isinstance(node, _FUNCTIONS):
                defs.setdefault(node.name, []).append((file, node))
            # a local culprit is only its own function's: another function's variable of
            # that name is another object
            mine = culprit if local_to is None or name == local_to else (lambda n: False)
            direct[(file, key)] = mine
            bound[(file, key)] = {target for target, value in binds if mine(value)}
            if calls:
                scopes.append((file, key, calls))
    handed: dict[str, dict[int, set[str]]] = {}
    for _ in range(MAX_HOPS):
        changed = False
        for file, key, calls in scopes:
            is_culprit = direct[(file, key)]
            names = bound[(file, key)] | handed.get(file, {}).get(key, set())
            for call in calls:
                called = _callee(call)
                if called is None or called[0] not in defs:
                    continue
                passed = [(i, a) for i, a in enumerate(call.args)] + \
                         [(k.arg, k.value) for k in call.keywords if k.arg]
                for where, arg in passed:
                    if not (is_culprit(arg) or (isinstance(arg, ast.Name) and arg.id in names)):
                        continue
                    for dfile, d in defs[called[0]]:
                        param = _parameter(d, where, called[1])
                        if param is None:
                            continue
                        got = handed.setdefault(dfile, {}).setdefault(d.lineno, set())
                        if param not in got:
                            got.add(param)
                            changed = True
        if not changed:
            break
    return handed


def _parameter(d: ast.FunctionDef | ast.AsyncFunctionDef, where: int | str,
               method: bool) -> str | None:
    """The parameter of ``d`` that receives argument ``where`` (a position or a keyword);
    a method's ``self``/``cls`` receives the object it is called on."""
    params = [a.arg for a in (*d.args.posonlyargs, *d.args.args)]
    if isinstance(where, str):
        known = params + [a.arg for a in d.args.kwonlyargs]
        return where if where in known else None
    if method and params and params[0] in ("self", "cls"):
        params = params[1:]
    return params[where] if where < len(params) else None
