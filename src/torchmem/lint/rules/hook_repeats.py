"""TMM112: a module hook registered again on every pass of a loop, its handle dropped.

Part of the TMM1xx family (memory kept alive longer than needed). ``register_forward_hook``
adds the hook to the module's hook dictionary and returns the only means of removing it.
Code that registers a hook and drops the handle, and runs again and again (a helper called
once per batch, an explainer object built for each image), adds one more hook to the same
module each time: the module keeps every hook, every hook keeps its closure or its object,
and with them whatever they recorded. The forward pass also slows down, one hook call per
registration. Read from the file alone (no torch), with :mod:`torchmem.lint.repeats`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of
from torchmem.lint.registry import Rule, register
from torchmem.lint.repeats import breaks, loop_names, repeated

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["HookRegisteredRepeatedly"]

_REGISTER = frozenset({"register_forward_hook", "register_forward_pre_hook",
                       "register_full_backward_hook", "register_backward_hook",
                       "register_full_backward_pre_hook"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _root(node: ast.AST) -> str | None:
    """The name at the bottom of ``a.b[0].c`` (of ``x`` for ``getattr(x, name)``)."""
    while type(node) in (ast.Attribute, ast.Subscript, ast.Call):
        if type(node) is ast.Call:
            if type(node.func) is ast.Name and node.func.id == "getattr" and node.args:
                node = node.args[0]
                continue
            node = node.func
        else:
            node = node.value  # type: ignore[attr-defined]
    return node.id if type(node) is ast.Name else None


def _own_attribute(module: ast.AST, ctx: Context) -> bool:
    """Whether ``module`` is ``self.X...`` where the class assigns ``self.X`` a new object
    (``self.norm = nn.LayerNorm(d)``): the object's own module, freed with it."""
    while type(module) in (ast.Attribute, ast.Subscript):
        inner = module.value  # type: ignore[attr-defined]
        if type(module) is ast.Attribute and type(inner) is ast.Name and inner.id == "self":
            break
        module = inner
    else:
        return False
    attr = module.attr  # type: ignore[attr-defined]
    cls_name = ctx.fn.class_name if ctx.fn is not None else None
    cls = next((c for c in ast.walk(ctx.tree) if type(c) is ast.ClassDef and
                c.name == cls_name), None) if ctx.tree is not None and cls_name else None
    return cls is not None and any(
        type(n) is ast.Assign and type(n.value) is ast.Call and any(
            key_of(t) == f"self.{attr}" for t in n.targets) for n in ast.walk(cls))


def _built_here(name: str, fn: ast.AST) -> bool:
    """Whether ``fn`` binds ``name`` to a new object (a call of a class, ``nn.Linear(...)``,
    ``models.vgg16()``, ``copy.deepcopy(m)``): a hook on it dies with it."""
    for node in ast.walk(fn):
        if type(node) is ast.Assign and type(node.value) is ast.Call and any(
                type(t) is ast.Name and t.id == name for t in node.targets):
            return True
    return False


def _callers_drop(name: str, ctx: Context) -> bool:
    """Whether the file calls ``name`` (or ``self.name``) and every call is a statement of
    its own, its result dropped."""
    if ctx.tree is None:
        return False
    keys = (name, f"self.{name}")
    calls = [n for n in ast.walk(ctx.tree) if type(n) is ast.Call and key_of(n.func) in keys]
    dropped = {id(n.value) for n in ast.walk(ctx.tree) if type(n) is ast.Expr}
    return bool(calls) and all(id(c) in dropped for c in calls)


def _binds(loop: ast.AST, name: str) -> bool:
    """Whether the body of ``loop`` assigns ``name`` (``layer = layers[i]``)."""
    return any(type(n) is ast.Assign and any(type(t) is ast.Name and t.id == name
                                             for t in n.targets)
               for stmt in loop.body for n in ast.walk(stmt))  # type: ignore[attr-defined]


@register
class HookRegisteredRepeatedly(Rule):
    """A hook registered on every pass of a loop and never removed.

    What:
        Flags ``m.register_forward_hook(...)`` (forward pre, backward, full backward) whose
        handle is dropped (a statement of its own, or returned by a function whose calls
        in the file all drop it), on a module that is not ``self``, not built by the
        same function and not an attribute the class assigns a new object
        (``self.norm = nn.LayerNorm(d)``), when the registration runs again and again: in a loop whose
        variable the module does not depend on, or in a function or constructor of the
        file that a loop calls with arguments that do not depend on the loop's variable
        (directly or through other functions and ``__init__`` methods of the file).

    Why:
        The handle is the only way to remove a hook. Each pass adds one more hook to the
        same module, and the module keeps them all: every hook's closure or object, and
        whatever it records (activations, gradients), stays alive for as long as the
        model, and the forward pass calls every stale hook. A helper object built per
        image or per batch (a CAM explainer, a fault injector, a feature probe) leaks
        itself and its records with each construction.

    Known problems:
        Only calls within the file are followed; a loop over a few configurations that
        builds one helper each is reported although the count is bounded. A helper that
        removes its hooks through the module's ``_forward_hooks`` dictionary is not
        recognised.

    Example:
        ```python
        def attach_probe(layer, store):
            def probe(module, inputs, output):
                store.append(output.detach())
            return layer.register_forward_hook(probe)

        def train(model, loader):
            for x, y in loader:
                features = []
                attach_probe(model.encoder, features)
                model(x).sum().backward()
        ```

    Use instead:
        ```python
        def attach_probe(layer, store):
            def probe(module, inputs, output):
                store.append(output.detach())
            return layer.register_forward_hook(probe)

        def train(model, loader):
            for x, y in loader:
                features = []
                handle = attach_probe(model.encoder, features)
                model(x).sum().backward()
                handle.remove()
        ```
    """

    code = "TMM112"
    name = "hook-registered-repeatedly"
    summary = "module hook registered on every pass of a loop with its handle dropped"

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> None:
        if type(node.value) is ast.Call:
            self._check(node.value, ctx)

    def visit_Return(self, node: ast.Return, ctx: Context) -> None:
        if type(node.value) is ast.Call and ctx.fn is not None and \
                type(ctx.fn.node) in _FUNCS and type(node.value.func) is ast.Attribute and \
                node.value.func.attr in _REGISTER and _callers_drop(ctx.fn.name, ctx):
            self._check(node.value, ctx)

    def _check(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if type(func) is not ast.Attribute or func.attr not in _REGISTER:
            return
        root = _root(func.value)
        if root is None or root == "self" and type(func.value) is ast.Name:
            return  # a module registering on itself: the hook dies with it
        fn = ctx.fn.node if ctx.fn is not None else None
        if fn is not None and type(fn) in _FUNCS and _built_here(root, fn) or \
                root == "self" and _own_attribute(func.value, ctx):
            return
        names = {n.id for n in ast.walk(func.value) if type(n) is ast.Name}
        where = self._repetition(names, ctx)
        if where is None:
            return
        module = ast.unparse(func.value)
        ctx.report(self, node, (
            f"a new hook is registered on '{module}' {where} and its handle is dropped: "
            f"the module keeps every one of them, with what each hook's closure or object "
            f"holds and records; keep the handle and call handle.remove() when done, or "
            f"register the hook once"))

    @staticmethod
    def _repetition(names: set[str], ctx: Context) -> str | None:
        """Where the repetition comes from, as words for the message, or None. ``names``:
        the names the module expression reads."""
        for loop in reversed(ctx.loops):
            if names & loop_names(loop.node) or any(_binds(loop.node, n) for n in names):
                break  # one hook per module the loop goes through: not a repetition
            if breaks(loop.node):
                break  # a search that stops at its first match
            if type(loop.node) in _LOOPS:
                return f"on every pass of the loop at line {loop.node.lineno}"
        fn = ctx.fn.node if ctx.fn is not None else None
        line = repeated(ctx, same_inputs=True).get(id(fn)) if fn is not None else None
        if line is not None:
            return f"each time '{ctx.fn.name}' runs (a loop at line {line} calls it)"  # type: ignore[union-attr]
        return None
