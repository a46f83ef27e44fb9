"""Hook objects in a reference cycle through the autograd graph (no torch).

A hook class whose method registers a closure over ``self`` on a node of the graph
(``out.grad_fn.register_hook(wrapper)``, ``wrapper`` using ``self``) and whose hook methods
keep the tensors they receive on ``self`` (``self.input = input``) closes a cycle: the kept
tensor's graph reaches the node, the node holds the closure, the closure holds the hook
object, and the hook object holds the tensor. Python's cyclic garbage collector does not see
the references held by autograd nodes, so each pass's tensors stay alive even after the
hooks are removed. :func:`cycle_stores` finds the stores that close such a cycle; a class
inherits the registration from a base class of the same file.

Known limitations:
    Only ``grad_fn.register_hook`` / ``register_prehook`` are followed (not a hook on a
    tensor); a stored value is recognised as a received tensor by the parameter's name
    (one naming an input, an output or a gradient).
"""

from __future__ import annotations

import ast

__all__ = ["cycle_stores"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NODE_HOOKS = frozenset({"register_hook", "register_prehook"})
_TENSOR_WORDS = ("input", "output", "grad")


def _uses_self(node: ast.AST, me: str) -> bool:
    return any(type(n) is ast.Name and n.id == me for n in ast.walk(node))


def _registers_self_closure(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``fn`` registers, on a ``grad_fn``, a hook that refers to ``self``."""
    args = fn.args.posonlyargs + fn.args.args
    if not args:
        return False
    me = args[0].arg
    closures = {n.name for n in ast.walk(fn) if isinstance(n, _FUNCS) and n is not fn
                and _uses_self(n, me)}
    for node in ast.walk(fn):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr in _NODE_HOOKS and node.args and \
                type(node.func.value) is ast.Attribute and node.func.value.attr == "grad_fn":
            hook = node.args[0]
            if (type(hook) is ast.Name and hook.id in closures) or \
                    (type(hook) is not ast.Name and _uses_self(hook, me)):
                return True
    return False


def _stores(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Assign]:
    """``self.a = p`` in ``fn`` where ``p`` is a parameter named like a received tensor."""
    args = fn.args.posonlyargs + fn.args.args
    if len(args) < 2 or fn.name == "__init__":
        return []
    me = args[0].arg
    tensors = {a.arg for a in args[1:] if any(w in a.arg.lower() for w in _TENSOR_WORDS)}
    found = []
    for node in ast.walk(fn):
        if type(node) is ast.Assign and type(node.value) is ast.Name and \
                node.value.id in tensors and any(
                    type(t) is ast.Attribute and type(t.value) is ast.Name and
                    t.value.id == me for t in node.targets):
            found.append(node)
    return found


def cycle_stores(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> list[ast.Assign]:
    """The stores of received tensors on ``self`` in ``cls``'s own methods, when ``cls`` or
    one of its base classes in the file registers a closure over ``self`` on a graph
    node; empty otherwise."""
    seen: set[str] = set()
    chain = [cls]
    registers = False
    while chain and not registers:
        current = chain.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        registers = any(isinstance(f, _FUNCS) and _registers_self_closure(f)
                        for f in current.body)
        chain.extend(classes[b.id] for b in current.bases
                     if type(b) is ast.Name and b.id in classes)
    if not registers:
        return []
    return [s for f in cls.body if isinstance(f, _FUNCS) for s in _stores(f)]
