"""Function summaries: what a call to a function of the same file does with its arguments.

The data flow of one function (:mod:`torchmem.lint.dataflow`) knows nothing of what a helper
returns. :class:`Summaries` indexes the functions and classes of the linted file and, when
the flow meets a call it can resolve, walks the callee once for the kinds of the arguments at
that call (and the call site's grad mode), memoised per ``(callee, argument kinds)``:

- ``returns``: the kind of what the callee returns (a loss computed by ``self.step(batch)``,
  ``return loss * n``, ``return loss, logging_output``);
- ``stores``: the ``self.*`` containers the callee adds a graph-carrying value to
  (``self.sum += val``, ``self.sums[key] += val``, ``self.outputs.append(log)``), with the
  line that does it.

Calls it resolves: ``self.method(...)`` inside a class (to that class's method),
``helper(...)`` (to a top-level function of the file), ``obj.method(...)`` where ``obj``
was assigned an instance of a class of the file in the same function
(``meter = Metric(); ... meter.update(loss)``; a model of the file too:
``model.compute_loss(out, y)``) or only ever at the script's top level (read by a function
that does not bind the name), ``self.attr.method(...)`` when every assignment of
``self.attr`` constructs one class (:mod:`torchmem.lint.instances`), and top-level
functions imported from other files of the tree (:mod:`torchmem.lint.imported`; walked in
their own file's context). Nested calls are summarised in turn, up to :data:`MAX_DEPTH` levels; recursion
stops at a function already being summarised.

Known limitations:
    Instances kept in nested containers (``self.stats[name][key].update(v)``), bound-method
    aliases, callbacks and hooks are not resolved: such calls keep the "unknown" kind.
"""

from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING, Callable, NamedTuple

from torchmem.lint.callbacks import GIVEN_GRAPHS, callback_summary, class_tensor_callables
from torchmem.lint.facts import key_of
from torchmem.lint.flags import call_flags
from torchmem.lint.folds import INPLACE_UPDATES, folded_state
from torchmem.lint.imported import imported_from
from torchmem.lint.instances import attribute_class, module_instances
from torchmem.lint.kinds import CONTAINER, GRAPH, TENSOR, TYPE, TYPED, VALUE
from torchmem.lint.knowledge import STEP_FUNCTIONS
from torchmem.lint.store_keys import varying_key
from torchmem.lint.stored import keeps_graph

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context
    from torchmem.lint.dataflow import Flow
    from torchmem.lint.imported import ImportedModule
    from torchmem.lint.walker import Walker

__all__ = ["Summary", "Summaries", "MAX_DEPTH"]

#: how deep summaries of summaries go (helper -> helper -> helper)
MAX_DEPTH = 3
_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
_ADD_METHODS = frozenset({"append", "extend", "appendleft", "add", "insert"})
class Summary(NamedTuple):
    """What one call does.

    Attributes:
        returns: kind of the returned value (0 when unknown or nothing).
        stores: ``(container key, line)`` of each ``self.*`` container the callee adds a
            graph-carrying value to.
        name: the callee's qualified name for messages (``Metric.update``).
        elements: the kinds of the elements when every ``return`` is a tuple literal of
            the same length (``return loss, out.argmax(1)``), else ``None``.
        kept: the stored expression of each entry of ``stores`` and its kind, in order.
        forwards: the callee runs a module's forward pass with autograd recording on
            (directly or through a function it calls).
        where: the file the callee is defined in, when it is another file (``utils.py``).
    """

    returns: int
    stores: tuple[tuple[str, int], ...]
    name: str
    elements: tuple[int, ...] | None = None
    kept: tuple[tuple[ast.expr, int], ...] = ()
    forwards: bool = False
    where: str = ""


class _Callee(NamedTuple):
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: ast.ClassDef | None
    bound: bool  # called as a method: the first parameter is self
    module: ImportedModule | None = None  # the other file it is defined in, if any


class Summaries:
    """The functions and classes of one file, and the summaries of calls to them."""

    def __init__(self, tree: ast.Module, path: str = "") -> None:
        self.path = path
        #: resolve imported functions (off for the summaries of an imported file itself,
        #: so that reading one helper never cascades through the whole tree)
        self.follow_imports = True
        self._imported: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef,
                                        ImportedModule] | None] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for stmt in tree.body:
            if isinstance(stmt, _FUNC_TYPES):
                self.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
        #: top-level names bound only to an instance of a class of the file
        self.module_instances = module_instances(tree, self.classes)
        self._memo: dict[tuple[int, tuple[tuple[str, int], ...], bool], Summary | None] = {}
        self._active: list[int] = []
        self._class_attrs: dict[int, dict[str, int]] = {}
        self._trains: dict[int, bool] = {}
        self._attr_classes: dict[int, dict[str, str]] = {}
        self._backward: dict[int, bool] = {}
        self.walker: Walker | None = None

    # -- resolution ---------------------------------------------------------------
    def _method(self, cls: ast.ClassDef, name: str
                ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        for stmt in cls.body:
            if isinstance(stmt, _FUNC_TYPES) and stmt.name == name:
                if any(key_of(d) in ("staticmethod", "property") for d in stmt.decorator_list):
                    return None
                return stmt
        for base in cls.bases:  # a base class of the same file
            parent = self.classes.get(key_of(base) or "")
            if parent is not None and parent is not cls:
                found = self._method(parent, name)
                if found is not None:
                    return found
        return None

    def imported(self, qualified: str | None, classes: bool = False
                 ) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ImportedModule] | None:
        """The function (or, with ``classes``, the class) of another file of the tree that
        an imported name refers to (:mod:`torchmem.lint.imported`), memoised per name."""
        return imported_from(self, qualified, classes)

    def resolve(self, func: ast.expr, flow: Flow, evaluation: bool = False) -> _Callee | None:
        """The function that ``func(...)`` calls, if it can be told: of this file, or a
        top-level function imported from another file of the tree (read for calls in
        per-step loops, and, with ``evaluation``, for a call the caller knows is made by
        evaluation code)."""
        t = type(func)
        if t is ast.Name:
            node = self.functions.get(func.id)  # type: ignore[attr-defined]
            if node is not None:
                return _Callee(node, None, False)
            if not self.follow_imports or not (evaluation or _step_loop(flow)):
                return None  # other files are read only for calls in per-step loops
            found = self.imported(flow.ctx.imports.get(func.id))  # type: ignore[attr-defined]
            return _Callee(found[0], None, False, found[1]) if found else None
        if t is not ast.Attribute:
            return None
        attr = func.attr  # type: ignore[attr-defined]
        if type(func.value) is not ast.Name:  # type: ignore[attr-defined]
            cls_name = attribute_class(self, func.value, flow)  # type: ignore[attr-defined]
        else:
            owner = func.value.id  # type: ignore[attr-defined]
            if owner in flow.ctx.imports and owner not in flow.env:  # import utils; utils.f()
                if not self.follow_imports or not (evaluation or _step_loop(flow)):
                    return None
                found = self.imported(f"{flow.ctx.imports[owner]}.{attr}")
                return _Callee(found[0], None, False, found[1]) if found else None
            cls_name = flow.ctx.fn.class_name if owner == "self" else (
                flow.instances.get(owner) or self.global_instance(owner, flow))
        if cls_name and cls_name.startswith("@"):  # meter = AverageMeter() of another file
            if not self.follow_imports or not (evaluation or _step_loop(flow)):
                return None
            other = self.imported(cls_name[1:], classes=True)
            if other is None:
                return None
            owner_cls, module = other
            method = module.summaries._method(owner_cls, attr)  # type: ignore[arg-type]
            if method is None:
                return None
            return _Callee(method, owner_cls, True, module)  # type: ignore[arg-type]
        cls = self.classes.get(cls_name) if cls_name else None
        if cls is None:
            return None
        method = self._method(cls, attr)
        return _Callee(method, cls, True) if method is not None else None

    def global_instance(self, name: str, flow: Flow) -> str | None:
        """The class of the instance a top-level name of the file holds
        (:func:`~torchmem.lint.instances.module_instances`), for a function that reads the
        name without binding it itself (``train_util.train_step(...)`` in a function,
        ``train_util = Trainer(...)`` under ``if __name__ == "__main__":``)."""
        found = self.module_instances.get(name)
        facts = flow.facts
        if found is None or name in facts.assigned or name in facts.params:
            return None
        return found

    # -- summarising --------------------------------------------------------------
    def summarize(self, call: ast.Call, flow: Flow, evaluation: bool = False
                  ) -> Summary | None:
        """The summary of ``call`` for the kinds of its arguments at this point."""
        callee = self.resolve(call.func, flow, evaluation)
        if callee is None or self.walker is None:
            return callback_summary(call, flow) if callee is None else None
        ctx = flow.ctx
        kinds = _argument_kinds(callee, call, flow)
        key = (id(callee.node), tuple(sorted(kinds.items())), bool(ctx.no_grad))
        memo = self._memo if callee.module is None else callee.module.summaries._memo
        if key in memo:  # a function of another file: summarised once for every importer
            return memo[key]
        if id(callee.node) in self._active or len(self._active) >= MAX_DEPTH:
            return None
        self._active.append(id(callee.node))
        module = callee.module
        try:
            if module is None:
                summary = self._walk(callee, kinds, ctx)
            else:  # walked in its own file's context (its imports), in the caller's mode
                saved = module.ctx.no_grad
                module.ctx.no_grad = int(bool(ctx.no_grad))
                try:
                    summary = module.summaries._walk(callee, kinds, module.ctx)._replace(
                        where=os.path.basename(module.path))
                finally:
                    module.ctx.no_grad = saved
        finally:
            self._active.pop()
        memo[key] = summary
        return summary

    def _walk(self, callee: _Callee, kinds: dict[str, int], ctx: Context) -> Summary:
        from torchmem.lint.classes import class_attrs
        from torchmem.lint.walker import Walker

        node = callee.node
        returns: list[int] = []
        tuples: list[list[int] | None] = []
        stores: list[tuple[str, int]] = []
        kept: list[tuple[ast.expr, int]] = []
        forwards: list[ast.Call] = []

        def on_return(stmt: ast.Return, c: Context) -> None:
            if c.fn.node is node and stmt.value is not None:
                returns.append(c.kind(stmt.value))
                value = stmt.value
                tuples.append([_merge([c.kind(e)]) for e in value.elts]
                              if type(value) is ast.Tuple else None)  # type: ignore[attr-defined]

        def on_augassign(stmt: ast.AugAssign, c: Context) -> None:
            target = stmt.target  # self.sum += val, self.sums[key] += val
            key = key_of(target.value if type(target) is ast.Subscript else target) or ""
            if type(stmt.op) is ast.Add and key.startswith("self.") and \
                    keeps_graph(stmt.value, c):
                stores.append((key, stmt.lineno))
                kept.append((stmt.value, c.kind(stmt.value)))
            elif type(stmt.op) is not ast.Add:
                on_fold(stmt, c)  # self.m *= d ... with a graph

        def on_fold(stmt: ast.AST, c: Context) -> None:
            found = folded_state(stmt, c)  # self.memory = m * self.memory + (1 - m) * x
            if found is not None:
                stores.append((f"self.{found[0]}", stmt.lineno))  # type: ignore[attr-defined]
                kept.append((found[1], c.kind(found[1])))

        def on_assign(stmt: ast.Assign, c: Context) -> None:
            on_fold(stmt, c)
            for target in stmt.targets:
                if type(target) is ast.Subscript and not isinstance(target.slice, ast.Constant):
                    key = key_of(target.value) or ""
                    if key.startswith("self.") and keeps_graph(stmt.value, c) and \
                            varying_key(stmt, c):  # self.h[env] = h: one entry per key
                        stores.append((key, stmt.lineno))
                        kept.append((stmt.value, c.kind(stmt.value)))

        def on_call(expr: ast.Call, c: Context) -> None:
            func = expr.func
            if not c.no_grad and not forwards and c.fn.node is node:
                if c.fn.flow.is_forward(expr, strict=True):
                    forwards.append(expr)
                elif len(self._active) < 2:  # one level of helpers: the cost stays bounded
                    inner = self.summarize(expr, c.fn.flow)
                    if inner is not None and inner.forwards:
                        forwards.append(expr)
            if type(func) is ast.Attribute and func.attr in INPLACE_UPDATES:
                on_fold(expr, c)  # self._avg.add_(rate * (x - self._avg))
            if type(func) is ast.Attribute and func.attr in _ADD_METHODS and expr.args:
                key = key_of(func.value) or ""
                if key.startswith("self.") and keeps_graph(expr.args[-1], c):
                    stores.append((key, expr.lineno))
                    kept.append((expr.args[-1], c.kind(expr.args[-1])))

        handlers: dict[type, list[Callable[..., None]]] = {
            ast.Return: [on_return], ast.AugAssign: [on_augassign], ast.Assign: [on_assign],
            ast.Call: [on_call]}
        walker = Walker(ctx, handlers, {h: [] for h in ("enter_loop", "leave_loop",
                                                         "enter_function", "leave_function")})
        saved = (ctx.class_attrs, ctx.in_module_class, ctx.cond_depth)
        if callee.cls is not None:
            attrs = self._class_attrs.get(id(callee.cls))
            if attrs is None:
                attrs = class_attrs(ctx, callee.cls)
                self._class_attrs[id(callee.cls)] = attrs
            ctx.class_attrs = attrs
            ctx.in_module_class = callee.cls.name in ctx.module_classes
        no_grad = ctx.no_grad
        try:
            walker.function(node, node.body, node.name, node.args, node.decorator_list,
                            class_name=callee.cls.name if callee.cls else None,
                            arg_kinds=kinds, force_no_grad=bool(no_grad))
        finally:
            ctx.class_attrs, ctx.in_module_class, ctx.cond_depth = saved
            walker.close()
        elements = None
        if tuples and all(t is not None and len(t) == len(tuples[0]) for t in tuples):  # type: ignore[arg-type]
            elements = tuple(_merge([t[i] for t in tuples])  # type: ignore[index]
                             for i in range(len(tuples[0])))  # type: ignore[arg-type]
        name = f"{callee.cls.name}.{node.name}" if callee.cls else node.name
        return Summary(_merge(returns), tuple(stores), name, elements, tuple(kept),
                       bool(forwards))

    def if_given_graphs(self, node: ast.FunctionDef | ast.AsyncFunctionDef, cls: ast.ClassDef,
                        ctx: Context) -> Summary | None:
        """The summary of method ``node`` of ``cls`` when every parameter annotated as a
        tensor (``x: torch.Tensor``, ``output: tuple[Tensor, Tensor]``) carries an autograd
        graph, as it does when a training loop passes a loss or a model output; ``None``
        when no parameter is annotated so."""
        kinds: dict[str, int] = {}
        args = node.args
        for a in (args.posonlyargs + args.args + args.kwonlyargs)[1:]:
            text = ast.unparse(a.annotation) if a.annotation is not None else ""
            if "Tensor" not in text:
                continue
            whole = text.rpartition("[")[0] if "[" in text else ""
            if any(w in whole for w in ("tuple", "Tuple", "Sequence", "list", "List")):
                kinds[a.arg] = GRAPH | CONTAINER
            elif not whole or "Optional" in whole:
                kinds[a.arg] = GRAPH | TYPED
        if not kinds and not class_tensor_callables(cls, ctx) or id(node) in self._active:
            return None
        self._active.append(id(node))
        ctx.scratch[GIVEN_GRAPHS] = True
        try:
            return self._walk(_Callee(node, cls, True), kinds, ctx)
        finally:
            self._active.pop()
            ctx.scratch[GIVEN_GRAPHS] = False


def _step_loop(flow: Flow) -> bool:
    """Whether the current point is in a loop over a data loader or a loop that trains, or
    in a ``train_step`` method run once per step: where an imported helper's summary matters."""
    return any(lp.loader or lp.training for lp in flow.ctx.loops) or \
        getattr(flow.ctx.fn, "name", None) in STEP_FUNCTIONS


def _merge(returns: list[int]) -> int:
    """The kind of a call whose ``return`` statements have these kinds: graph-carrying when
    some path returns a graph (what that path returns), a tensor when all return one."""
    kind = 0
    if not returns:
        return 0
    graph = [k for k in returns if k & GRAPH]
    if graph:
        kind = GRAPH
        for k in graph:
            kind |= k & (VALUE & ~TYPED)
        if all(k & TYPED and not k & CONTAINER for k in graph):
            kind |= TYPED
    elif all(k & TENSOR for k in returns):
        kind = TENSOR | (TYPED if all(k & TYPED for k in returns) else 0)
    if all(k & TYPE for k in returns):
        for k in returns:
            kind |= k & TYPE
    return kind


def _argument_kinds(callee: _Callee, call: ast.Call, flow: Flow) -> dict[str, int]:
    """Kinds of the callee's parameters at this call (positional and keyword arguments)."""
    args = callee.node.args
    params = [a.arg for a in args.posonlyargs + args.args]
    if callee.bound and params:
        params = params[1:]
    out: dict[str, int] = {}
    for name, value in zip(params, call.args):
        if type(value) is ast.Starred:
            break
        kind = flow.kind(value)
        if kind:
            out[name] = kind
    names = set(params) | {a.arg for a in args.kwonlyargs}
    for kw in call.keywords:
        if kw.arg in names:
            kind = flow.kind(kw.value)
            if kind:
                out[kw.arg] = kind  # type: ignore[index]
    return out | call_flags(callee.node, callee.bound, call, flow.ctx)  # if flag:
