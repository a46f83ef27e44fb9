"""Keys of ``d[k] = v`` stores in a function called again and again: whether they change
from call to call.

A forward hook that stores its output under a key (``self.hidden[device] = output``,
``activation[name] = output`` with ``name`` fixed by the closure), or a method that keeps
its argument under a key its caller passes (``self.lstm_h[env_id.start] = state``),
overwrites the previous call's entry: the dictionary holds one value per key, not one per
call. Only a key that changes with every call (a counter the file increments, ``len(d)``,
``next(it)``) makes the dictionary grow.

Known limitations:
    A counter is recognised by name only (a key the file increments with ``+=`` anywhere,
    or rebinds to ``x + 1``); a key computed from a clock or a random source is taken to
    be fixed.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import child_nodes
from torchmem.lint.facts import key_of

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["varying_key"]

_GROWING_CALLS = frozenset({"len", "next", "id"})


def _counters(ctx: Context) -> frozenset[str]:
    """Keys the file increments (``self.step += 1``, ``i = i + 1``), computed once."""
    found = ctx.scratch.get("hook_key_counters")
    if found is not None:
        return found
    keys: set[str] = set()
    stack: list[ast.AST] = [ctx.tree] if ctx.tree is not None else []
    while stack:
        node = stack.pop()
        t = type(node)
        if t is ast.AugAssign:
            key = key_of(node.target)  # type: ignore[attr-defined]
            if key is not None:
                keys.add(key)
        elif t is ast.Assign and len(node.targets) == 1:  # type: ignore[attr-defined]
            key = key_of(node.targets[0])  # type: ignore[attr-defined]
            value = node.value  # type: ignore[attr-defined]
            if key is not None and type(value) is ast.BinOp and (
                    key_of(value.left) == key or key_of(value.right) == key):
                keys.add(key)
        stack.extend(child_nodes(node))
    ctx.scratch["hook_key_counters"] = frozen = frozenset(keys)
    return frozen


def varying_key(node: ast.AST, ctx: Context) -> bool:
    """Whether the key of the ``d[k] = v`` statement ``node`` may change from one call of
    the function to the next (so that the dictionary grows); True when ``node`` is not
    such a statement."""
    if type(node) is not ast.Assign or type(node.targets[0]) is not ast.Subscript:  # type: ignore[attr-defined]
        return True
    index = node.targets[0].slice  # type: ignore[attr-defined]
    counters = _counters(ctx)
    stack: list[ast.AST] = [index]
    while stack:
        part = stack.pop()
        if type(part) is ast.Call and type(part.func) is ast.Name and \
                part.func.id in _GROWING_CALLS:  # type: ignore[attr-defined]
            return True
        if type(part) in (ast.Name, ast.Attribute) and key_of(part) in counters:
            return True
        stack.extend(child_nodes(part))
    return False
