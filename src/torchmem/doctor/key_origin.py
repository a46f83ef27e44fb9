"""Where the value kept under a dict key entered the dict that was handed over.

A helper that keeps what it is handed (``store_metrics(metrics)``, whose loop appends
``metrics[key]`` to a list per key) is named at the call that hands the values over. When
what it hands over is a dict and the culprit ends with a constant key
(``trainer._stored_metrics['train']['nll_loss']``), the line to change is the one that
put that key's value into the dict, where ``.detach()`` or ``.item()`` belongs:
``metrics[f"{prefix}nll_loss"] = policy_nll_loss.cpu().mean()``, while every other entry
is detached. :func:`key_origin` follows the handed-over name back in the caller's
function: to a dict literal there, to item assignments there, or, when the name is bound
to what a function of the script returns (``loss, metrics = self.get_batch_loss_metrics(
...)``), to the item assignments and returned dict literals of that function. A key
written as an f-string matches when the key ends with its constant tail (the formatted
parts come first: ``f"{prefix}nll_loss"`` for ``nll_loss``). The origin is used only when
exactly one statement writes that key, so the line is never a guess.
"""

from __future__ import annotations

import ast
from typing import Sequence

from torchmem.doctor.call_sites import enclosing_function
from torchmem.doctor.source import Statement, load_tree

__all__ = ["key_origin", "last_key"]


def last_key(path: str) -> str | None:
    """The constant string key a culprit path ends with (``x['a']['loss']`` -> ``loss``).

    Example:
        >>> last_key("trainer._stored_metrics['train']['nll_loss']"), last_key("x[3]")
        ('nll_loss', None)
    """
    if not path.endswith("']"):
        return None
    start = path.rfind("['")
    return path[start + 2:-2] or None if start >= 0 else None


def _key_matches(node: ast.AST | None, key: str) -> bool:
    if isinstance(node, ast.Constant):
        return node.value == key
    if isinstance(node, ast.JoinedStr) and node.values:
        tail = node.values[-1]
        if isinstance(tail, ast.Constant) and isinstance(tail.value, str) and tail.value:
            return key.endswith(tail.value)
    return False


def _writes(scope: ast.AST, name: str | None, key: str) -> list[ast.AST]:
    """Statements of ``scope`` that write ``key`` into the dict ``name`` (any dict when
    None): item assignments, dict literals bound to it or returned."""
    found: list[ast.AST] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _key_matches(target.slice, key) and (
                        name is None or ast.unparse(target.value) == name):
                    found.append(node)
                elif isinstance(target, ast.Name) and (name is None or target.id == name) \
                        and isinstance(node.value, ast.Dict) \
                        and any(_key_matches(k, key) for k in node.value.keys):
                    found.append(node)
        elif isinstance(node, ast.Return) and name is None and isinstance(node.value, ast.Dict) \
                and any(_key_matches(k, key) for k in node.value.keys):
            found.append(node)
    return found


def _called_function(value: ast.AST) -> str | None:
    """``f`` of ``f(...)`` / ``self.f(...)``."""
    if isinstance(value, ast.Call):
        func = value.func
        return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return None


def key_origin(site: Statement, path: str, files: Sequence[str]) -> Statement | None:
    """The one statement that put the value kept at ``path`` (a path ending with a
    constant key) into the dict that the call ``site`` hands over (its ``value``, a
    name); None when there is not exactly one."""
    key, name = last_key(path), site.value
    if key is None or not name or not name.isidentifier():
        return None
    parsed = load_tree(site.file)
    func = enclosing_function(parsed[0], site.line) if parsed is not None else None
    if func is None or parsed is None:
        return None
    found = [(site.file, node) for node in _writes(func, name, key) if node.lineno < site.line]
    if not found:  # bound to what a function of the script returns: follow it
        callee = None
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and node.lineno < site.line and any(
                    name in {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
                    for t in node.targets):
                callee = _called_function(node.value) or callee
        for file in dict.fromkeys([site.file, *files]) if callee else ():
            loaded = load_tree(file)
            for node in ast.walk(loaded[0]) if loaded is not None else ():
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and node.name == callee:
                    found += [(file, w) for w in _writes(node, None, key)]
    if len(found) != 1:
        return None
    file, node = found[0]
    loaded = load_tree(file)
    lines = loaded[1] if loaded is not None else ()
    code = lines[node.lineno - 1].strip() if 0 < node.lineno <= len(lines) else ""
    owner = enclosing_function(loaded[0], node.lineno) if loaded is not None else None
    item = isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript)
    return Statement(file=file, line=node.lineno, code=code, kind="setitem",
                     function=owner.name if owner is not None else "<module>", in_loop=False,
                     value=ast.unparse(node.value) if item else None,
                     target=ast.unparse(node.targets[0].value) if item else None)
