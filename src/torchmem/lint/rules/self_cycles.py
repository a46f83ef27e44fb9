"""TMM113: an object that keeps a reference to itself, built again and again.

Part of the TMM1xx family (memory kept alive longer than needed). ``self.f = self.method``
(a bound method holds its object), ``self.f = lambda: self.x``, ``functools.partial(fn,
self)``, ``self.register_forward_hook(hook)`` with a hook that closes over ``self``, or
``self.items.append(Child(self))`` put the object in a reference cycle. Reference counting
never frees it: only Python's cyclic garbage collector does, when it next runs. An object
built on every pass of a loop then piles up with everything it holds (a module's
parameters, the tensors it keeps) between collections; the collector's thresholds count
objects, not bytes, and know nothing of CUDA memory. Read from the file alone (no torch),
with :func:`torchmem.lint.repeats.built_repeatedly`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.registry import Rule, register
from torchmem.lint.repeats import built_repeatedly

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["SelfReferenceCycle"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_HOOKS = frozenset({"register_forward_hook", "register_forward_pre_hook",
                    "register_full_backward_hook", "register_backward_hook",
                    "register_full_backward_pre_hook"})
_GROW = frozenset({"append", "add", "insert", "extend"})


def _mentions_self(node: ast.AST, self_name: str) -> bool:
    return any(type(n) is ast.Name and n.id == self_name for n in ast.walk(node))


class _Method:
    """One method of the class: the name of ``self`` and its nested functions."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, methods: frozenset[str]):
        args = fn.args.posonlyargs + fn.args.args
        self.self_name = args[0].arg if args else ""
        self.methods = methods
        self.closures = {n.name for n in ast.walk(fn) if type(n) in _FUNCS and n is not fn and
                         _mentions_self(n, self.self_name)}  # type: ignore[attr-defined]
        #: local names bound to a registering method (``f = m.register_forward_hook``)
        self.registrars = {t.id for n in ast.walk(fn) if type(n) is ast.Assign
                           for t in n.targets if type(t) is ast.Name and any(
                               type(a) is ast.Attribute and a.attr.startswith("register_")
                               for a in ast.walk(n.value))}

    def refers(self, value: ast.AST) -> str | None:
        """What in ``value`` refers to the object, in words, or None."""
        s = self.self_name
        t = type(value)
        if t is ast.Name:
            if value.id == s:  # type: ignore[attr-defined]
                return "the object itself"
            if value.id in self.closures:  # type: ignore[attr-defined]
                return f"'{value.id}', a function that closes over '{s}'"  # type: ignore[attr-defined]
        elif t is ast.Attribute:
            if type(value.value) is ast.Name and value.value.id == s and \
                    value.attr in self.methods:  # type: ignore[attr-defined]
                return f"'{s}.{value.attr}', a method bound to the object"  # type: ignore[attr-defined]
        elif t is ast.Lambda:
            if _mentions_self(value.body, s):  # type: ignore[attr-defined]
                return f"a lambda that reads '{s}'"
        elif t is ast.Call:
            func = value.func  # type: ignore[attr-defined]
            name = func.attr if type(func) is ast.Attribute else getattr(func, "id", "")
            if name.startswith("register_") or name in self.registrars:
                return None  # returns a handle: the module, not the handle, keeps the hook
            for arg in [*value.args, *(k.value for k in value.keywords)]:  # type: ignore[attr-defined]
                found = self.refers(arg)
                if found is not None:
                    return found
        return None


def _is_self(node: ast.AST, self_name: str) -> bool:
    return type(node) is ast.Attribute and type(node.value) is ast.Name and \
        node.value.id == self_name  # type: ignore[attr-defined]


def _cycles(cls: ast.ClassDef, methods: frozenset[str]):  # type: ignore[no-untyped-def]
    """``(statement, what)`` for each statement of the class's methods that makes the
    object refer to itself."""
    for fn in cls.body:
        if type(fn) not in _FUNCS:
            continue
        m = _Method(fn, methods)  # type: ignore[arg-type]
        s = m.self_name
        if not s:
            continue
        for node in ast.walk(fn):
            if type(node) is ast.Assign and any(_is_self(t, s) for t in node.targets):
                what = m.refers(node.value)
                if what is not None:
                    yield node, what
            elif type(node) is ast.Expr and type(node.value) is ast.Call and \
                    type(node.value.func) is ast.Attribute:
                call, attr = node.value, node.value.func.attr
                recv = call.func.value  # type: ignore[attr-defined]
                if attr in _HOOKS and type(recv) is ast.Name and recv.id == s and call.args:
                    what = m.refers(call.args[0])
                    if what is not None:
                        yield node, f"a hook on the object holding {what}"
                elif attr in _GROW and _is_self(recv, s) and call.args and \
                        type(call.args[-1]) is ast.Call and any(
                            type(a) is ast.Name and a.id == s for a in call.args[-1].args):
                    yield node, f"an object built with '{s}' and kept in '{ast.unparse(recv)}'"


def _family_methods(cls: ast.ClassDef, ctx: Context) -> frozenset[str]:
    """Method names of the class, of its base classes in the file and of its subclasses in
    the file (a base class's ``self.update`` may be defined by a subclass)."""
    classes = {c.name: c for c in getattr(ctx.tree, "body", ()) if type(c) is ast.ClassDef}
    bases = {c: {b.id for b in node.bases if type(b) is ast.Name} for c, node in classes.items()}
    family = {cls.name}
    changed = True
    while changed:
        changed = False
        for name, parents in bases.items():
            if name not in family and parents & family or name in family and \
                    not parents & set(classes) <= family:
                family |= {name} | (parents & set(classes))
                changed = True
    return frozenset(f.name for c in family if c in classes for f in classes[c].body
                     if type(f) in _FUNCS)  # type: ignore[attr-defined]


@register
class SelfReferenceCycle(Rule):
    """An object that keeps a reference to itself, built on every pass of a loop.

    What:
        Flags, in a class that the file builds again and again (in a loop, or in a
        function a loop calls, through the file's own calls and base classes), a method
        statement that makes the object refer to itself: ``self.f = self.method`` (a
        bound method), ``self.f = lambda: self.x``, ``self.f = helper(self.g)`` or
        ``functools.partial(fn, self)`` (a call given such a value),
        ``self.register_forward_hook(hook)`` with a hook that closes over ``self``, and
        ``self.items.append(Child(self))``.

    Why:
        The object is in a reference cycle, so dropping the last name does not free it:
        only the cyclic garbage collector does, when it next runs. Built on every pass,
        the objects pile up between collections with all they hold (a module's
        parameters and buffers, cached tensors, graphs); the collector counts objects,
        not bytes, and CUDA memory is invisible to it. Memory grows in a sawtooth, or
        steadily when collections are rare.

    Known problems:
        Only construction in the same file is seen; an object that holds nothing large
        costs little. A closure that reads ``self`` only to call a method is still a
        cycle (the rule is right, the cost may be small).

    Example:
        ```python
        import torch.nn as nn

        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(512, 512)
                self.act = self.double

            def double(self, x):
                return 2 * x

            def forward(self, x):
                return self.act(self.fc(x))

        for step in range(1000):
            Scaled()
        ```

    Use instead:
        ```python
        import torch.nn as nn

        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(512, 512)
                self.act_name = "double"

            def double(self, x):
                return 2 * x

            def forward(self, x):
                return getattr(self, self.act_name)(self.fc(x))

        for step in range(1000):
            Scaled()
        ```
    """

    code = "TMM113"
    name = "self-reference-cycle"
    summary = "object that refers to itself (bound method, closure, hook) built on every pass"

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> None:
        line = built_repeatedly(ctx).get(node.name)
        if line is None:
            return
        methods = _family_methods(node, ctx)
        for stmt, what in _cycles(node, methods):
            ctx.report(self, stmt, (
                f"this keeps {what} on every '{node.name}' object, a reference cycle that "
                f"only Python's cyclic garbage collector frees, and the file builds a new "
                f"one again and again (line {line}): the old objects and what they hold "
                f"(parameters, tensors) pile up between collections; keep no reference to "
                f"the object on itself (call the method by name, pass values instead of "
                f"'self', or use a weakref)"))
