"""A hook on an autograd node that holds the object that holds the node: a cycle no
garbage collector can free.

``t.register_hook(fn)`` and ``t.grad_fn.register_hook(fn)`` store ``fn`` in autograd's C++
node. When ``fn`` holds an object (``self.save_grad``, ``functools.partial(clear, self)``,
a lambda or a nested function that uses ``self``) and that object keeps ``t`` (or any
tensor whose graph reaches the node), the object keeps the node and the node keeps the
object::

    self -> self.cache -> t -> t.grad_fn -> hook -> self

Python's cyclic collector cannot see the edge from the node to the hook (it is a C++
reference), so the objects and their graphs stay alive for the rest of the run. The
doctor sees the effect (values a variable held that are still alive though nothing in
Python reaches them: :mod:`torchmem.doctor.autograd_held`); :func:`self_hook_site` finds
the statement that closes the cycle: the one ``register_hook`` call in the script's
methods whose hook holds ``self``.
"""

from __future__ import annotations

import ast
from typing import Iterable

from torchmem.doctor.source import Statement, load_tree

__all__ = ["self_hook_site"]

#: methods that store a hook in an autograd node (tensor hooks and node hooks)
_REGISTER = ("register_hook", "register_prehook")


def _uses_self(node: ast.AST, me: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == me for n in ast.walk(node))


def _holds_self(hook: ast.expr, me: str, method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the hook expression keeps ``me`` (the method's ``self``) alive."""
    if isinstance(hook, ast.Attribute) and isinstance(hook.value, ast.Name) and hook.value.id == me:
        return True  # a bound method: self.save_grad
    if isinstance(hook, (ast.Lambda, ast.Call)):
        return _uses_self(hook, me)  # lambda g: self.f(g); functools.partial(f, self)
    if isinstance(hook, ast.Name):
        for node in ast.walk(method):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not method \
                    and node.name == hook.id:
                return _uses_self(node, me)  # a nested function that uses self
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == hook.id for t in node.targets):
                if isinstance(node.value, (ast.Lambda, ast.Call)) and _uses_self(node.value, me):
                    return True  # wrapper = functools.partial(f, self)
    return False


def _methods(tree: ast.Module) -> Iterable[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.args.args:
                yield item, item.args.args[0].arg


def self_hook_site(files: Iterable[str]) -> tuple[Statement, str] | None:
    """The one statement of ``files`` that registers, in a method, an autograd hook holding
    that method's ``self``, with the hook as written (``wrapper``, ``self.save_grad``);
    None when there is none or more than one."""
    found: list[tuple[Statement, str]] = []
    for file in dict.fromkeys(f for f in files if f):
        parsed = load_tree(file)
        if parsed is None:
            continue
        tree, lines = parsed
        for method, me in _methods(tree):
            for node in ast.walk(method):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in _REGISTER and len(node.args) == 1):
                    continue
                hook = node.args[0]
                if _holds_self(hook, me, method):
                    code = lines[node.lineno - 1].strip() if 0 < node.lineno <= len(lines) else ""
                    found.append((Statement(file, node.lineno, code, "hook", method.name, False,
                                            value=ast.unparse(hook), method=node.func.attr),
                                  ast.unparse(hook)))
    return found[0] if len(found) == 1 else None
