"""Forward hooks: functions registered with ``register_forward_hook`` (no torch).

A forward hook runs after every forward pass of its module, with the module's output as
its third argument (fourth with ``with_kwargs=True``). During training that output carries
the autograd graph of the forward pass, so a hook that appends it to a list kept on an
object (``self.activations.append(output)``) or in an enclosing function keeps one graph
per forward pass. :func:`forward_hooks` finds the hooks of a file: methods registered as
``m.register_forward_hook(self.save)`` (a method of the class around the call) and
functions registered by name (``m.register_forward_hook(save)``: a function of the scope
around the call, or of the module).

Known limitations:
    Hooks registered from another file, through ``functools.partial`` or a lambda, or
    through a framework's own registry are not seen.
"""

from __future__ import annotations

import ast

from torchmem.lint.children import child_nodes

__all__ = ["forward_hooks"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _hook_arg(call: ast.Call) -> tuple[ast.expr | None, int]:
    """The hook a ``register_forward_hook`` call registers, and its output's position."""
    hook = call.args[0] if call.args else next(
        (kw.value for kw in call.keywords if kw.arg == "hook"), None)
    kwargs = any(kw.arg == "with_kwargs" and isinstance(kw.value, ast.Constant)
                 and kw.value.value is True for kw in call.keywords)
    return hook, 3 if kwargs else 2


def forward_hooks(tree: ast.AST) -> dict[int, str]:
    """``id(function node) -> name of its output parameter`` for the forward hooks of a
    file (empty when the file registers none). ``self.save`` is looked up among the
    methods of the class around the call, a name among the functions of the scope around
    the call, then of the module."""
    methods: dict[tuple[int, str], ast.FunctionDef | ast.AsyncFunctionDef] = {}
    functions: dict[tuple[int, str], ast.FunctionDef | ast.AsyncFunctionDef] = {}
    calls: list[tuple[ast.Call, int, int | None]] = []  # call, scope id, class id

    def visit(node: ast.AST, scope: int, cls: int | None) -> None:
        for child in child_nodes(node):
            if isinstance(child, _FUNCS):
                if cls is not None and scope == cls:
                    methods[(cls, child.name)] = child
                else:
                    functions[(scope, child.name)] = child
                visit(child, id(child), cls)
            elif isinstance(child, ast.ClassDef):
                visit(child, id(child), id(child))
            else:
                if type(child) is ast.Call and type(child.func) is ast.Attribute and \
                        child.func.attr == "register_forward_hook":
                    calls.append((child, scope, cls))
                visit(child, scope, cls)

    try:
        visit(tree, id(tree), None)
    finally:
        del visit  # it calls itself through a cell: no cycle left behind
    found: dict[int, str] = {}
    for call, scope, cls in calls:
        hook, index = _hook_arg(call)
        fn = None
        if type(hook) is ast.Attribute and type(hook.value) is ast.Name and \
                hook.value.id == "self" and cls is not None:
            fn = methods.get((cls, hook.attr))
        elif type(hook) is ast.Name:
            fn = functions.get((scope, hook.id)) or functions.get((id(tree), hook.id))
        if fn is None:
            continue
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if params and params[0] == "self" and type(hook) is ast.Attribute:
            params = params[1:]
        if len(params) > index:
            found[id(fn)] = params[index]
    return found
