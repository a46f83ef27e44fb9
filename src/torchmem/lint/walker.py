"""The single traversal: statements in execution order, each expression node once.

:class:`Walker` drives the data flow (:class:`~torchmem.lint.dataflow.Flow`) through a
function's statements, keeps the loop / ``no_grad`` / conditional context in the
:class:`~torchmem.lint.context.Context`, and calls the selected rules' handlers for every
node type from that one walk. No torch.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable

from torchmem.lint import facts as _facts
from torchmem.lint import flags
from torchmem.lint.calls import transform_kind
from torchmem.lint.children import fields
from torchmem.lint.classes import class_attrs, is_module_class
from torchmem.lint.containers import element_class
from torchmem.lint.context import Context, FunctionState, LoopState
from torchmem.lint.dataflow import ACT, GRAPH, LOADER, TYPE, VALUE, Flow, meet
from torchmem.lint.expr_visit import expression_visitor
from torchmem.lint.facts import key_of
from torchmem.lint.gather import gather
from torchmem.lint.gradmode import effects, grad_delta, requires_grad
from torchmem.lint.joins import join_branches, join_loop
from torchmem.lint.knowledge import (
    EVAL_LOADER_NAME,
    LIGHTNING_NO_GRAD_HOOKS,
    is_no_grad_decorator,
    last_name,
)

__all__ = ["Walker"]

#: statements of newer Pythons (``except*`` 3.11, ``match`` 3.10), compared by identity
_TRY_STAR = getattr(ast, "TryStar", None)
_MATCH = getattr(ast, "Match", None)

_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


class Walker:
    def __init__(self, ctx: Context, nodes: dict[type, list[Callable[..., None]]],
                 hooks: dict[str, list[Callable[..., None]]]) -> None:
        self.ctx = ctx
        self.nodes = nodes
        self.hooks = hooks
        self.expr, self._release = expression_visitor(nodes, ctx)

    def close(self) -> None:
        """Break the visitor's reference cycle (the closure calls itself), so that the file's
        tree and context are freed when the lint ends, not at the next cyclic collection."""
        self._release()

    def exprs(self, nodes: Iterable[ast.AST | None]) -> None:
        expr = self.expr
        for node in nodes:
            if node is not None:
                expr(node)

    # statements: in execution order, with the data flow
    def stmts(self, body: list[ast.stmt]) -> None:
        stmt = self.stmt
        for node in body:
            stmt(node)

    def stmt(self, node: ast.stmt) -> None:
        ctx = self.ctx
        cls = node.__class__
        handlers = self.nodes.get(cls)
        if handlers:
            for h in handlers:
                h(node, ctx)
        flow = ctx.fn.flow
        if cls is ast.Expr:
            self.expr(node.value)  # type: ignore[attr-defined]
            effects(ctx, node.value)  # type: ignore[attr-defined]
        elif cls is ast.Assign:
            self.expr(node.value)  # type: ignore[attr-defined]
            self.exprs(node.targets)  # type: ignore[attr-defined]
            kind = flow.kind(node.value)  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                if type(target) is ast.Attribute and target.attr == "requires_grad":
                    requires_grad(ctx, target.value, node.value)  # type: ignore[attr-defined]
                    continue
                value = node.value  # type: ignore[attr-defined]
                if isinstance(value, ast.Tuple) and isinstance(target, ast.Tuple) and len(
                        target.elts) == len(value.elts):
                    for t, v in zip(target.elts, value.elts):
                        flow.bind(t, flow.kind(v))
                elif type(target) is ast.Tuple and type(value) is ast.Call and kind & VALUE \
                        and ctx.summaries is not None:
                    summary = ctx.summaries.summarize(value, flow)
                    elements = summary.elements if summary is not None else None
                    if elements is not None and len(elements) == len(target.elts):
                        flow.bind(target, elements)  # loss, pred = self._step(x, y)
                    else:
                        flow.bind(target, kind)
                else:
                    flow.bind(target, kind or transform_kind(flow, target, value))
                    if type(target) is ast.Name:
                        self._instance(target.id, value)
        elif cls is ast.AugAssign:
            self.expr(node.target)  # type: ignore[attr-defined]
            self.expr(node.value)  # type: ignore[attr-defined]
            target = node.target  # type: ignore[attr-defined]
            old = flow.kind(target)
            kind = flow.derive(old | flow.kind(node.value))  # type: ignore[attr-defined]
            if old & 2:  # in place on a leaf: still the same leaf (and PyTorch raises)
                kind = old
            if type(target) is not ast.Subscript:
                flow.bind(target, kind | (flow.kind(target) & TYPE))
        elif cls is ast.AnnAssign:
            self.exprs((node.annotation, node.value, node.target))  # type: ignore[attr-defined]
            if node.value is not None:  # type: ignore[attr-defined]
                flow.bind(node.target, flow.kind(node.value))  # type: ignore[attr-defined]
        elif cls is ast.For or cls is ast.AsyncFor:
            self._for(node)
        elif cls is ast.While:
            self.expr(node.test)  # type: ignore[attr-defined]
            self._loop(node, None)
        elif cls is ast.If:
            self.expr(node.test)  # type: ignore[attr-defined]
            self._branches(flags.branches(node, ctx))  # type: ignore[arg-type]
        elif cls is ast.With or cls is ast.AsyncWith:
            self._with(node)
        elif cls is ast.Try or cls is _TRY_STAR:
            self._try(node)
        elif cls is ast.FunctionDef or cls is ast.AsyncFunctionDef:
            self.exprs(node.decorator_list)  # type: ignore[attr-defined]
            self._args(node.args)  # type: ignore[attr-defined]
            self.expr_opt(node.returns)  # type: ignore[attr-defined]
            self.function(node, node.body, node.name, node.args, node.decorator_list)  # type: ignore[attr-defined]
            flow.env.pop(node.name, None)  # type: ignore[attr-defined]
        elif cls is ast.ClassDef:
            self._class(node)  # type: ignore[arg-type]
        elif cls is ast.Return:
            self.expr_opt(node.value)  # type: ignore[attr-defined]
        elif cls is ast.Delete:
            self.exprs(node.targets)  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                for key in _facts.target_keys(target):
                    flow.env.pop(key, None)
        elif cls is ast.Import or cls is ast.ImportFrom:
            ctx.add_import(node)
        elif cls is _MATCH:
            self.expr(node.subject)  # type: ignore[attr-defined]
            bodies = []
            for case in node.cases:  # type: ignore[attr-defined]
                self.expr(case.pattern)
                self.expr_opt(case.guard)
                bodies.append(case.body)
            self._branches(bodies + [[]])
        else:
            for name in fields(cls):
                value = getattr(node, name)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast.expr):
                            self.expr(item)
                elif isinstance(value, ast.expr):
                    self.expr(value)

    def expr_opt(self, node: ast.AST | None) -> None:
        if node is not None:
            self.expr(node)

    def _instance(self, name: str, value: ast.expr) -> None:
        """Remember that ``name`` holds an instance of a class of this file (or of another
        file), or a container of such instances (:mod:`torchmem.lint.containers`)."""
        instances = self.ctx.fn.flow.instances
        summaries = self.ctx.summaries
        imports = self.ctx.imports if summaries is not None and summaries.follow_imports \
            else {}
        if summaries is not None and (held := element_class(value, summaries.classes, imports)):
            instances[name] = held  # {k: AverageMeter() for k in names}
        elif type(value) is ast.Call and type(value.func) is ast.Name and summaries is not None \
                and value.func.id in summaries.classes:
            instances[name] = value.func.id
        elif type(value) is ast.Call and type(value.func) is ast.Name and \
                value.func.id in imports:
            instances[name] = "@" + imports[value.func.id]  # a class of another file?
        elif instances:
            instances.pop(name, None)

    def _args(self, args: ast.arguments) -> None:
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            self.expr_opt(a.annotation)
        self.exprs(args.defaults)
        self.exprs(args.kw_defaults)

    def _branches(self, bodies: list[list[ast.stmt]]) -> None:
        ctx = self.ctx
        flow = ctx.fn.flow
        start = flow.env
        ends: list[tuple[list[ast.stmt], dict[str, int]]] = []
        no_grad0 = ctx.no_grad
        ctx.cond_depth += 1
        for body in bodies:
            flow.env = dict(start)
            ctx.no_grad = no_grad0
            self.stmts(body)
            if not (body and isinstance(body[-1], _EXITS)):
                ends.append((body, flow.env))
        ctx.cond_depth -= 1
        ctx.no_grad = no_grad0
        if not ends:
            flow.env = start
            return
        flow.env = join_branches(ends, ctx)

    def _with(self, node: ast.stmt) -> None:
        ctx = self.ctx
        delta = 0
        for item in node.items:  # type: ignore[attr-defined]
            self.expr(item.context_expr)
            delta += grad_delta(ctx, item.context_expr)
            if item.optional_vars is not None:
                self.expr(item.optional_vars)
                ctx.fn.flow.bind(item.optional_vars, 0)
        saved = ctx.no_grad
        ctx.no_grad = max(0, saved + delta) if delta > -1000 else 0
        self.stmts(node.body)  # type: ignore[attr-defined]
        ctx.no_grad = saved

    def _try(self, node: ast.stmt) -> None:
        ctx = self.ctx
        flow = ctx.fn.flow
        before = dict(flow.env)
        self.stmts(node.body)  # type: ignore[attr-defined]
        self.stmts(node.orelse)  # type: ignore[attr-defined]
        env = flow.env
        ctx.cond_depth += 1
        ctx.handler_depth += 1
        for handler in node.handlers:  # type: ignore[attr-defined]
            self.expr_opt(handler.type)
            flow.env = dict(before)
            self.stmts(handler.body)
            if not (handler.body and isinstance(handler.body[-1], _EXITS)):
                env = meet(env, flow.env)
        ctx.handler_depth -= 1
        ctx.cond_depth -= 1
        flow.env = env
        self.stmts(node.finalbody)  # type: ignore[attr-defined]

    def _for(self, node: ast.stmt) -> None:
        self.expr(node.iter)  # type: ignore[attr-defined]
        self._loop(node, node.iter)  # type: ignore[attr-defined]

    def _loop(self, node: ast.stmt, iterable: ast.expr | None) -> None:
        ctx = self.ctx
        fn = ctx.fn
        flow = fn.flow
        facts = fn.facts.loops[id(node)]
        loader = eval_loader = False
        if iterable is not None:
            loader = flow.is_loader(iterable) or bool(flow.kind(iterable) & LOADER)
            if loader:
                inner = iterable
                while type(inner) is ast.Call and inner.args:  # type: ignore[attr-defined]
                    inner = inner.args[0]  # type: ignore[attr-defined]
                k = key_of(inner)
                eval_loader = bool(k and EVAL_LOADER_NAME.search(last_name(k)))
        state = LoopState(node, facts, ctx.no_grad > 0, ctx.cond_depth, loader, eval_loader)
        before = dict(flow.env)
        env = flow.env
        for key in facts.assigned:
            v = env.get(key)
            if v is not None and v & VALUE:
                if v & TYPE:
                    env[key] = v & TYPE
                else:
                    del env[key]
        if iterable is not None:
            flow.bind(node.target, flow.elt(iterable))  # type: ignore[attr-defined]
            self.expr(node.target)  # type: ignore[attr-defined]
        ctx.loops.append(state)
        for h in self.hooks["enter_loop"]:
            h(state, ctx)
        no_grad0 = ctx.no_grad
        self.stmts(node.body)  # type: ignore[attr-defined]
        ctx.no_grad = no_grad0
        for h in self.hooks["leave_loop"]:
            h(state, ctx)
        ctx.loops.pop()
        flow.env = join_loop(node.body, before, flow.env, ctx)  # type: ignore[attr-defined]
        self.stmts(node.orelse)  # type: ignore[attr-defined]

    def _class(self, node: ast.ClassDef) -> None:
        ctx = self.ctx
        self.exprs(node.decorator_list)
        self.exprs(node.bases)
        self.exprs(kw.value for kw in node.keywords)
        is_module = is_module_class(node, ctx)
        if is_module:
            ctx.module_classes.add(node.name)
        saved = (ctx.class_attrs, ctx.in_module_class)
        ctx.class_attrs = class_attrs(ctx, node)
        ctx.in_module_class = is_module
        lightning = any("Lightning" in (key_of(b) or "") for b in node.bases)
        for stmt in node.body:
            if type(stmt) in _FUNC_TYPES:
                self.exprs(stmt.decorator_list)  # type: ignore[attr-defined]
                self._args(stmt.args)  # type: ignore[attr-defined]
                no_grad = lightning and stmt.name in LIGHTNING_NO_GRAD_HOOKS  # type: ignore[attr-defined]
                self.function(stmt, stmt.body, stmt.name, stmt.args,  # type: ignore[attr-defined]
                              stmt.decorator_list, class_name=node.name,  # type: ignore[attr-defined]
                              force_no_grad=no_grad)
            else:
                self.stmt(stmt)
        ctx.class_attrs, ctx.in_module_class = saved

    def function(self, node: ast.AST, body: list[ast.stmt], name: str,
                 args: ast.arguments | None, decorators: list[ast.expr] | None = None, *,
                 class_name: str | None = None, force_no_grad: bool = False,
                 arg_kinds: dict[str, int] | None = None) -> None:
        ctx = self.ctx
        facts = gather(body, ctx.qualname)
        outer = ctx.fn
        env: dict[str, int] = {}
        if outer is not None:
            for k, v in outer.flow.env.items():
                if v & TYPE:
                    env[k] = v & TYPE
        state = FunctionState(node, name, facts, None, False, class_name)  # type: ignore[arg-type]
        flow = Flow(ctx, facts, env)
        state.flow = flow
        if args is not None:
            facts.params = frozenset(a.arg for a in args.posonlyargs + args.args + args.kwonlyargs)
            for a in args.posonlyargs + args.args + args.kwonlyargs:
                kind = (arg_kinds.get(a.arg) if arg_kinds else None) or flow.initial_kind(
                    a.arg, a.annotation)
                if kind:
                    env[a.arg] = kind
                else:
                    env.pop(a.arg, None)
        hook_output = ctx.hook_outputs.get(id(node)) if ctx.hook_outputs else None
        if hook_output is not None:
            env[hook_output] = GRAPH | ACT  # the output of the forward pass just run
        no_grad = force_no_grad or id(node) in ctx.quiet_functions or any(
            is_no_grad_decorator(ctx.qualname(d.func if type(d) is ast.Call else d) or key_of(
                d.func if type(d) is ast.Call else d)) for d in decorators or ())
        state.no_grad = no_grad
        state.eval_callers = id(node) in ctx.eval_functions
        saved = (ctx.fn, ctx.loops, ctx.no_grad, ctx.cond_depth, ctx.handler_depth)
        ctx.fn, ctx.loops, ctx.no_grad, ctx.cond_depth, ctx.handler_depth = (
            state, [], int(no_grad), 0, 0)
        for h in self.hooks["enter_function"]:
            h(state, ctx)
        flags.enter(node, arg_kinds, ctx)  # a summary specialised on flag arguments
        self.stmts(body)
        flags.leave(node, ctx)
        for h in self.hooks["leave_function"]:
            h(state, ctx)
        ctx.fn, ctx.loops, ctx.no_grad, ctx.cond_depth, ctx.handler_depth = saved
