"""Forward hooks: functions registered with ``register_forward_hook`` (no torch).

A forward hook runs after every forward pass of its module, with the module's output as
its third argument (fourth with ``with_kwargs=True``). During training that output carries
the autograd graph of the forward pass, so a hook that appends it to a list kept on an
object (``self.activations.append(output)``) or in an enclosing function keeps one graph
per forward pass. :func:`forward_hooks` finds the hooks of a file: methods registered as
``m.register_forward_hook(self.save)`` and functions registered by name
(``m.register_forward_hook(save)``), matched by name within the file.

Known limitations:
    Hooks registered from another file, through ``functools.partial`` or a lambda, or
    through a framework's own registry are not seen.
"""

from __future__ import annotations

import ast

__all__ = ["forward_hooks"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _registered(tree: ast.AST) -> dict[tuple[str, bool], int]:
    """``(name, is_method) -> index of the output argument`` of the registered hooks."""
    out: dict[tuple[str, bool], int] = {}
    for node in ast.walk(tree):
        if type(node) is not ast.Call:
            continue
        func = node.func
        if type(func) is not ast.Attribute or func.attr != "register_forward_hook":
            continue
        hook = node.args[0] if node.args else next(
            (kw.value for kw in node.keywords if kw.arg == "hook"), None)
        kwargs = any(kw.arg == "with_kwargs" and isinstance(kw.value, ast.Constant)
                     and kw.value.value is True for kw in node.keywords)
        index = 3 if kwargs else 2
        if type(hook) is ast.Attribute and type(hook.value) is ast.Name and \
                hook.value.id == "self":
            out[(hook.attr, True)] = index
        elif type(hook) is ast.Name:
            out[(hook.id, False)] = index
    return out


def forward_hooks(tree: ast.AST) -> dict[int, str]:
    """``id(function node) -> name of its output parameter`` for the forward hooks of a
    file (empty when the file registers none)."""
    registered = _registered(tree)
    if not registered:
        return {}
    found: dict[int, str] = {}

    def visit(node: ast.AST, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FUNCS):
                params = [a.arg for a in child.args.posonlyargs + child.args.args]
                method = in_class and bool(params) and params[0] == "self"
                index = registered.get((child.name, method))
                if method:
                    params = params[1:]
                if index is not None and len(params) > index:
                    found[id(child)] = params[index]
                visit(child, False)
            elif isinstance(child, ast.ClassDef):
                visit(child, True)
            else:
                visit(child, in_class)

    visit(tree, False)
    return found
