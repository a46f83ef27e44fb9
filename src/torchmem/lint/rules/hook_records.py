"""TMM108: module hooks whose records nothing clears.

Part of the TMM1xx family (:mod:`torchmem.lint.rules.graph`: graphs kept alive longer than
needed). A forward hook runs on every forward pass; one that appends what it sees
(``self.outputs.append(output)``) to a list keeps one entry per pass until something
clears the list. Two shapes make that list grow for good, both read from one file (no
torch):

* **a reset that forgets a list**: a class whose hooks append to several lists and whose
  reset method (any method but ``__init__`` and the hooks) empties some of them
  (``self.outputs = []``, ``self.outputs.clear()``) but never another: the reset shows
  that the records are meant to live one batch, and the forgotten list keeps every batch;
* **a recording hook that can never be removed**: a method of a helper class (not an
  ``nn.Module``) registers a recording hook on a module that comes from outside the method
  (a parameter, an attribute of ``self``, or what a call makes of them) and drops the
  handle that ``register_forward_hook`` returns. Each new helper adds one more hook to the
  same module; the old ones keep recording every forward pass into lists nothing clears.
  A hook on a module the method builds itself (``vgg = models.vgg16()``) dies with it;
* **a hook object in a cycle through the graph** (:mod:`._graph_hook_cycle`): a hook
  class that registers a closure over ``self`` on a graph node and keeps the tensors its
  hooks receive on ``self``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchmem.lint.children import scope_nodes
from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._graph_hook_cycle import cycle_stores

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["HookRecordsKept"]

_REGISTER = frozenset({"register_forward_hook", "register_forward_pre_hook",
                       "register_full_backward_hook", "register_backward_hook",
                       "register_full_backward_pre_hook"})
_GROW = frozenset({"append", "extend", "insert"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
#: the dictionaries of a module's hooks: a class that reaches into them removes hooks by hand
_HOOK_DICTS = frozenset({"_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                         "_backward_pre_hooks"})
_EMPTY_CALLS = frozenset({"list", "dict", "deque", "OrderedDict", "defaultdict"})



def _self_attr(node: ast.AST, self_name: str) -> str | None:
    """``attr`` for ``self.attr``, else None."""
    return node.attr if type(node) is ast.Attribute and type(node.value) is ast.Name and \
        node.value.id == self_name else None


def _self_name(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    args = fn.args.posonlyargs + fn.args.args
    return args[0].arg if args else None


def _appends(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.Call]:
    """``attr -> first call`` for ``self.attr.append(...)`` (extend, insert) in ``fn``."""
    me = _self_name(fn)
    found: dict[str, ast.Call] = {}
    if me is None:
        return found
    for node in scope_nodes(fn.body):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr in _GROW:
            attr = _self_attr(node.func.value, me)
            if attr is not None and attr not in found:
                found[attr] = node
    return found


def _records(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``fn`` appends to something it does not bind itself (a record kept after
    the call: an attribute, a closure's or a global list)."""
    local = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    for node in scope_nodes(fn.body):
        if type(node) is ast.Assign:
            local.update(t.id for t in node.targets if type(t) is ast.Name)
    for node in scope_nodes(fn.body):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr in _GROW:
            root = node.func.value
            while type(root) in (ast.Attribute, ast.Subscript):
                root = root.value  # type: ignore[attr-defined]
            if type(root) is ast.Name and (root.id not in local or
                                           type(node.func.value) is not ast.Name):
                return True
    return False


def _emptied(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Attributes of ``self`` that ``fn`` empties: ``self.a = []`` (``{}``, ``list()``,
    ``None``), ``self.a.clear()``, ``del self.a`` / ``del self.a[:]``."""
    me = _self_name(fn)
    found: set[str] = set()
    if me is None:
        return found
    for node in scope_nodes(fn.body):
        if type(node) is ast.Assign:
            value = node.value
            empty = (type(value) in (ast.List, ast.Dict, ast.Tuple) and not (
                getattr(value, "elts", None) or getattr(value, "keys", None))) or (
                type(value) is ast.Constant and value.value is None) or (
                type(value) is ast.Call and not value.args and type(value.func) is ast.Name
                and value.func.id in _EMPTY_CALLS)
            if empty:
                for target in node.targets:
                    attr = _self_attr(target, me)
                    if attr is not None:
                        found.add(attr)
        elif type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr == "clear":
            attr = _self_attr(node.func.value, me)
            if attr is not None:
                found.add(attr)
        elif type(node) is ast.Delete:
            for target in node.targets:
                attr = _self_attr(target.value if type(target) is ast.Subscript else target,
                                  me)
                if attr is not None:
                    found.add(attr)
    return found


def _registrations(cls: ast.ClassDef) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef,
                                                        ast.Call, bool]]:
    """``(method, register call, handle dropped)`` for the hook registrations in the
    methods of ``cls``."""
    for fn in cls.body:
        if not isinstance(fn, _FUNCS):
            continue
        dropped = {id(s.value) for s in scope_nodes(fn.body) if type(s) is ast.Expr}
        for node in scope_nodes(fn.body):
            if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                    node.func.attr in _REGISTER and node.args:
                yield fn, node, id(node) in dropped


def _is_module_class(cls: ast.ClassDef, ctx: Context) -> bool:
    """Whether a base of ``cls`` looks like an ``nn.Module`` (a name ending in Module)."""
    for base in cls.bases:
        name = ctx.qualname(base) or (base.attr if type(base) is ast.Attribute else
                                      base.id if type(base) is ast.Name else "")
        if name.endswith("Module"):
            return True
    return False


def _from_outside(target: ast.expr, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                  seen: frozenset[str] = frozenset()) -> bool:
    """Whether the module ``target`` comes from outside ``fn``: rooted at a parameter or an
    attribute of ``self`` (not ``self`` itself), or at a local bound from a call that is
    given such a value. A local bound from a call of nothing outside (a model the method
    builds) is not."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    me = params[0] if params else None
    node = target
    depth = 0
    while type(node) in (ast.Attribute, ast.Subscript):
        node = node.value  # type: ignore[attr-defined]
        depth += 1
    if type(node) is ast.Call:
        return _made_from_outside(node, fn, params, seen)
    if type(node) is not ast.Name or node.id in seen:
        return False
    if node.id == me:
        return depth > 0
    if node.id in params:
        return True
    for stmt in scope_nodes(fn.body):
        if type(stmt) is ast.Assign and any(type(t) is ast.Name and t.id == node.id
                                            for t in stmt.targets):
            return _made_from_outside(stmt.value, fn, params, seen | {node.id})
    return False


def _made_from_outside(value: ast.expr, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                       params: list[str], seen: frozenset[str]) -> bool:
    """Whether the value a local is bound to comes from outside ``fn``: for a method call
    (``x.to(device)``, ``self.encoder.layer(i)``) the object it is called on decides; for a
    function of a module (``find_layer(self.encoder, name)``) the arguments it is given."""
    if type(value) is not ast.Call:
        return _from_outside(value, fn, seen)
    func = value.func
    root = func
    while type(root) in (ast.Attribute, ast.Subscript, ast.Call):
        root = root.func if type(root) is ast.Call else root.value  # type: ignore[attr-defined]
    local = type(root) is ast.Name and (root.id in params or any(
        type(s) is ast.Assign and any(type(t) is ast.Name and t.id == root.id
                                      for t in s.targets) for s in scope_nodes(fn.body)))
    if type(func) is ast.Attribute and (local or type(func.value) is ast.Call):
        return _made_from_outside(func.value, fn, params, seen)
    given = list(value.args) + [k.value for k in value.keywords]
    return any(_from_outside(g, fn, seen) for g in given if type(g) is not ast.Constant)


def _classes(ctx: Context) -> dict[str, ast.ClassDef]:
    """The classes of the file by name, computed once per file."""
    classes = ctx.scratch.get("TMM108_classes")
    if classes is None:
        classes = {n.name: n for n in ast.walk(ctx.tree) if type(n) is ast.ClassDef} \
            if ctx.tree is not None else {}
        ctx.scratch["TMM108_classes"] = classes
    return classes


@register
class HookRecordsKept(Rule):
    """Module hooks that append records which nothing clears.

    What:
        Flags, in a class, (1) the append of a forward or backward hook method to a list
        ``self.a`` that no method but ``__init__`` empties, when the class's reset method
        empties another list its hooks append to; (2) a ``register_forward_hook`` (pre,
        backward) call whose handle is dropped, in a method of a class that is not an
        ``nn.Module``, when the hook records (a method or a callable of the file that
        appends to a list it does not create) and the module comes from outside the method;
        (3) ``self.input = input`` (a parameter named like an input, output or gradient)
        in a method of a class that, itself or through a base class of the file, registers
        a closure over ``self`` on a graph node (``out.grad_fn.register_hook(wrapper)``).

    Why:
        A hook runs on every forward (backward) pass; what it appends stays referenced,
        with the autograd graph behind it during training, until the list is emptied. A
        reset that empties some of a class's hook records shows they are meant to last one
        batch; the list it forgets keeps every batch for the whole run. A dropped handle
        means the hook can never be removed: each new helper object adds another hook to
        the same model, and the hooks of the old ones keep recording into lists that
        nothing clears any more. A closure over ``self`` held by a graph node, and a tensor
        of that graph held by ``self``, make a reference cycle through autograd that
        Python's garbage collector cannot see: every pass's tensors stay alive, even after
        the hooks are removed.

    Known problems:
        Off by default (on trial). Read from one class: records emptied by another class
        are not seen (a class that reaches into ``module._forward_hooks`` is taken to
        remove its hooks by hand); a hook
        registered through ``functools.partial``, a lambda or a factory's result is not
        followed, nor a closure of the registering method (its records are the method's
        own, read right after the pass). A helper created once per program keeps its
        hooks harmlessly.

    Example:
        ```python
        class ActivationHook:
            def __init__(self, layer):
                self.inputs, self.outputs = [], []
                self.handles = [layer.register_forward_pre_hook(self.pre_hook),
                                layer.register_forward_hook(self.hook)]

            def pre_hook(self, layer, args):
                self.inputs.append(args)

            def hook(self, layer, args, output):
                self.outputs.append(output)

            def reset(self):
                self.outputs = []
        ```

    Use instead:
        ```python
        class ActivationHook:
            def __init__(self, layer):
                self.inputs, self.outputs = [], []
                self.handles = [layer.register_forward_pre_hook(self.pre_hook),
                                layer.register_forward_hook(self.hook)]

            def pre_hook(self, layer, args):
                self.inputs.append(args)

            def hook(self, layer, args, output):
                self.outputs.append(output)

            def reset(self):
                self.outputs = []
                self.inputs = []
        ```
    """

    code = "TMM108"
    name = "hook-records-kept"
    summary = ("hook records that nothing clears: a reset that forgets a list, a dropped "
               "handle, a hook in a cycle through the graph")
    default_enabled = False
    trial = True

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> None:
        # a text search first: most files register no hook, and their classes cost nothing
        words = ctx.scratch.get("TMM108_words")
        if words is None:
            source = ctx.source or ""
            words = ctx.scratch["TMM108_words"] = (
                "grad_fn" in source, "register_" in source and "_hook(" in source)
        if words[0]:
            self._cycles(node, ctx)
        if words[1]:
            self._hooks(node, ctx)

    def _cycles(self, node: ast.ClassDef, ctx: Context) -> None:
        for store in cycle_stores(node, _classes(ctx)):
            ctx.report(self, store.targets[0], (
                f"'{ast.unparse(store.targets[0])}' keeps the tensor this hook receives, whose "
                f"graph reaches the node where the class registered a closure over self: a "
                f"reference cycle through autograd that Python's garbage collector cannot "
                f"see, so every pass's tensors stay alive, even after the hooks are removed; "
                f"give the closure a weakref to self, or clear the attribute after use"))

    def _hooks(self, node: ast.ClassDef, ctx: Context) -> None:
        methods = {f.name: f for f in node.body if isinstance(f, _FUNCS)}
        registrations = list(_registrations(node))
        if not registrations:
            return
        hooks: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for fn, call, _ in registrations:
            attr = _self_attr(call.args[0], _self_name(fn) or "")
            if attr in methods:
                hooks[attr] = methods[attr]  # type: ignore[index]
        self._forgotten(node, methods, hooks, ctx)
        if not _is_module_class(node, ctx) and not any(
                type(n) is ast.Attribute and n.attr in _HOOK_DICTS for n in ast.walk(node)):
            self._dropped(node, methods, registrations, ctx)

    def _forgotten(self, node: ast.ClassDef, methods: dict, hooks: dict, ctx: Context) -> None:
        appended: dict[str, ast.Call] = {}
        for hook in hooks.values():
            for attr, call in _appends(hook).items():
                appended.setdefault(attr, call)
        if len(appended) < 2:
            return
        emptied: set[str] = set()
        for name, fn in methods.items():
            if name != "__init__" and name not in hooks:
                emptied |= _emptied(fn)
        if not emptied & set(appended):
            return
        for attr, call in appended.items():
            if attr not in emptied:
                reset = sorted(emptied & set(appended))
                ctx.report(self, call, (
                    f"'self.{attr}' gets one entry per pass of this hook and nothing empties "
                    f"it, while the class's reset empties 'self.{reset[0]}': every pass's "
                    f"records (and, during training, their graphs) stay for the whole run; "
                    f"empty 'self.{attr}' where 'self.{reset[0]}' is emptied"))

    def _dropped(self, node: ast.ClassDef, methods: dict, registrations: list,
                 ctx: Context) -> None:
        for fn, call, dropped in registrations:
            if not dropped or not _from_outside(call.func.value, fn):
                continue
            if self._recording(call.args[0], fn, node, methods, ctx):
                ctx.report(self, call, (
                    f"the handle of this '{call.func.attr}' is dropped, so the hook can never "
                    f"be removed from a module that outlives this object: each new "
                    f"'{node.name}' adds another hook, and the old ones keep appending every "
                    f"pass's records to lists nothing clears; keep the handle and call "
                    f"handle.remove() when done"))

    @staticmethod
    def _recording(hook: ast.expr, fn, cls: ast.ClassDef, methods: dict, ctx: Context) -> bool:
        """Whether ``hook`` (``self.m``, ``self.attr`` built from a class of the file with a
        ``__call__``, or a function of the file) appends records."""
        attr = _self_attr(hook, _self_name(fn) or "")
        if attr is not None and attr in methods:
            return _records(methods[attr])
        classes = _classes(ctx)
        if attr is not None:
            for method in methods.values():
                for stmt in scope_nodes(method.body):
                    if type(stmt) is ast.Assign and type(stmt.value) is ast.Call and \
                            type(stmt.value.func) is ast.Name and \
                            stmt.value.func.id in classes and any(
                                _self_attr(t, _self_name(method) or "") == attr
                                for t in stmt.targets):
                        call = next((f for f in classes[stmt.value.func.id].body
                                     if isinstance(f, _FUNCS) and f.name == "__call__"), None)
                        if call is not None and _records(call):
                            return True
            return False
        if type(hook) is ast.Name and ctx.tree is not None and not any(
                isinstance(s, _FUNCS) and s.name == hook.id for s in scope_nodes(fn.body)):
            # a function of the module; a closure of the method records into the method's
            # own lists, read right after (a one-shot capture), and is not followed
            for stmt in ctx.tree.body:
                if isinstance(stmt, _FUNCS) and stmt.name == hook.id:
                    return _records(stmt)
        return False
