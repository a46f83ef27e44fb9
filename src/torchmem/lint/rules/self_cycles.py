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
_SCRATCH = "TMM113.methods"
_HOOKS = frozenset({"register_forward_hook", "register_forward_pre_hook",
                    "register_full_backward_hook", "register_backward_hook",
                    "register_full_backward_pre_hook"})
_GROW = frozenset({"append", "add", "insert", "extend"})


def _mentions_self(node: ast.AST, self_name: str) -> bool:
    return any(type(n) is ast.Name and n.id == self_name for n in ast.walk(node))


class _Method:
    """The method around a statement: the name of ``self``, the method names of its class
    family, its nested functions that read ``self`` (recorded as the walk meets them,
    before their use) and (computed when first asked) its names bound to a registering
    method."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, self_name: str,
                 methods: frozenset[str]):
        self.fn = fn
        self.self_name = self_name
        self.methods = methods
        args = fn.args
        self.params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        self.closures: set[str] = set()  # filled as the nested definitions are visited
        self._registrars: set[str] | None = None

    @property
    def registrars(self) -> set[str]:
        """Local names bound to a registering method (``f = m.register_forward_hook``)."""
        if self._registrars is None:
            self._registrars = {t.id for n in ast.walk(self.fn) if type(n) is ast.Assign
                                for t in n.targets if type(t) is ast.Name and any(
                                    type(a) is ast.Attribute and a.attr.startswith("register_")
                                    for a in ast.walk(n.value))}
        return self._registrars

    def refers(self, value: ast.AST) -> str | None:
        """What in ``value`` refers to the object, in words, or None."""
        s = self.self_name
        t = type(value)
        if t is ast.Name:
            if value.id == s:  # type: ignore[attr-defined]
                return "the object itself"
            if value.id not in self.params and value.id in self.closures:  # type: ignore[attr-defined]
                return f"'{value.id}', a function that closes over '{s}'"  # type: ignore[attr-defined]
        elif t is ast.Attribute:
            if type(value.value) is ast.Name and value.value.id == s and \
                    value.attr in self.methods:  # type: ignore[attr-defined]
                return f"'{s}.{value.attr}', a method bound to the object"  # type: ignore[attr-defined]
        elif t is ast.Lambda:
            if _mentions_self(value.body, s):  # type: ignore[attr-defined]
                return f"a lambda that reads '{s}'"
        elif t is ast.Call:
            for arg in [*value.args, *(k.value for k in value.keywords)]:  # type: ignore[attr-defined]
                found = self.refers(arg)
                if found is not None:
                    func = value.func  # type: ignore[attr-defined]
                    name = func.attr if type(func) is ast.Attribute else getattr(func, "id", "")
                    if name.startswith("register_") or name in self.registrars:
                        return None  # a handle: the module, not the handle, keeps the hook
                    return found
        return None


def _is_self(node: ast.AST, self_name: str) -> bool:
    return type(node) is ast.Attribute and type(node.value) is ast.Name and \
        node.value.id == self_name  # type: ignore[attr-defined]


def _method(ctx: Context) -> _Method | None:
    """The method around the current statement (memoised per function), or None outside
    a method of a top-level class."""
    fn = ctx.fn
    if fn is None or fn.class_name is None or type(fn.node) not in _FUNCS:
        return None
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    found = memo.get(id(fn.node))
    if found is None:
        args = fn.node.args  # type: ignore[attr-defined]
        first = (args.posonlyargs + args.args)[:1]
        if not first:
            return None
        classes = memo.setdefault("classes", {})
        if fn.class_name not in classes:
            classes[fn.class_name] = _family_methods(fn.class_name, ctx)
        found = memo[id(fn.node)] = _Method(fn.node, first[0].arg,  # type: ignore[arg-type]
                                            classes[fn.class_name])
    return found  # type: ignore[no-any-return]


def _family_methods(cls_name: str, ctx: Context) -> frozenset[str]:
    """Method names of the class, of its base classes in the file and of its subclasses in
    the file (a base class's ``self.update`` may be defined by a subclass)."""
    classes = {c.name: c for c in getattr(ctx.tree, "body", ()) if type(c) is ast.ClassDef}
    parents = {c: {b.id for b in node.bases if type(b) is ast.Name} & classes.keys()
               for c, node in classes.items()}
    family = {cls_name}
    todo = [cls_name]
    while todo:  # upwards: the bases of the file, transitively
        for base in parents.get(todo.pop(), ()):
            if base not in family:
                family.add(base)
                todo.append(base)
    todo = [cls_name]
    while todo:  # downwards: the subclasses of the file, transitively
        current = todo.pop()
        for sub, bases in parents.items():
            if current in bases and sub not in family:
                family.add(sub)
                todo.append(sub)
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

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> None:
        """A function nested in a method that reads ``self`` (a hook, a callback)."""
        m = _method(ctx)
        if m is not None and _mentions_self(node, m.self_name):
            m.closures.add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        target = node.targets[0]
        if ctx.fn is None or ctx.fn.class_name is None or type(target) is not ast.Attribute or \
                type(target.value) is not ast.Name:
            return  # cheap first test: not ``self.x = ...`` in a method
        m = _method(ctx)
        if m is None or not any(_is_self(t, m.self_name) for t in node.targets):
            return
        what = m.refers(node.value)
        if what is not None:
            self._report(node, what, ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> None:
        call = node.value
        if type(call) is not ast.Call or type(call.func) is not ast.Attribute or \
                not call.args or (call.func.attr not in _HOOKS and call.func.attr not in _GROW):
            return
        m = _method(ctx)
        if m is None:
            return
        s, attr, recv = m.self_name, call.func.attr, call.func.value
        if attr in _HOOKS and type(recv) is ast.Name and recv.id == s:
            what = m.refers(call.args[0])
            if what is not None:
                self._report(node, f"a hook on the object holding {what}", ctx)
        elif attr in _GROW and _is_self(recv, s) and type(call.args[-1]) is ast.Call and any(
                type(a) is ast.Name and a.id == s for a in call.args[-1].args):
            self._report(node, f"an object built with '{s}' and kept in "
                               f"'{ast.unparse(recv)}'", ctx)

    def _report(self, node: ast.stmt, what: str, ctx: Context) -> None:
        name = ctx.fn.class_name  # type: ignore[union-attr]
        line = built_repeatedly(ctx).get(name)  # type: ignore[arg-type]
        if line is None:
            return
        ctx.report(self, node, (
            f"this keeps {what} on every '{name}' object, a reference cycle that "
            f"only Python's cyclic garbage collector frees, and the file builds a new "
            f"one again and again (line {line}): the old objects and what they hold "
            f"(parameters, tensors) pile up between collections; keep no reference to "
            f"the object on itself (call the method by name, pass values instead of "
            f"'self', or use a weakref)"))
