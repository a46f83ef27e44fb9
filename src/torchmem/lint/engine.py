"""The lint engine: parse once, walk once, dispatch every rule from that walk (no torch).

:func:`lint_source` parses the text with :func:`ast.parse`, then a single traversal visits
every statement in execution order and every expression once. While it walks, it keeps
the data flow of the current function (:mod:`torchmem.lint.dataflow`), the loops and
``with torch.no_grad()`` blocks around the current node, and calls the handlers of the
selected rules for each node type (``visit_Call``...) plus the ``enter_loop`` /
``leave_loop`` / ``leave_function`` hooks. Rules never walk the tree themselves.

Example:
    >>> from torchmem.lint.engine import lint_source
    >>> lint_source("import torch\\ntorch.ones(1).storage()\\n")[0].code
    'TMM402'
"""

from __future__ import annotations

import ast
import re
import sys
from typing import Any, Callable, Iterable, Sequence

from torchmem.lint import facts as _facts
from torchmem.lint.dataflow import (
    LOADER, MODEL, TYPE, VALUE, Flow, meet,
)
from torchmem.lint.facts import FunctionFacts, LoopFacts, key_of
from torchmem.lint.knowledge import (
    ENABLE_GRAD_CONTEXTS, EVAL_FUNCTION, EVAL_LOADER_NAME, LIGHTNING_NO_GRAD_HOOKS,
    NO_GRAD_CONTEXTS, last_name,
)
from torchmem.lint.registry import Rule, select_rules
from torchmem.lint.violation import Edit, Fix, LintSyntaxError, Violation

__all__ = ["lint_source", "Context", "LoopState", "FunctionState"]

_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
_LINE_SPLIT = re.compile(r"\r\n|\r|\n")
_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]*(?:[,\s]+[A-Z]+[0-9]*)*))?",
                   re.IGNORECASE)
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_RECURSION_LIMIT = 12_000
#: methods whose ``self.<attr> = ...`` assignments define a class's attribute kinds
_SETUP_METHODS = frozenset({"__init__", "setup", "configure_model", "build", "_build",
                            "reset_parameters", "__post_init__"})


class LoopState:
    """A loop around the current node, as the rules see it.

    Attributes:
        node: the ``for``/``while`` node.
        facts: what its body does (:class:`~torchmem.lint.facts.LoopFacts`).
        no_grad: whether the loop itself runs with autograd recording disabled.
        cond_depth: the engine's conditional depth when the loop body starts; a node is
            executed on every iteration when ``ctx.cond_depth == loop.cond_depth``.
        loader: whether it iterates over batches (a ``DataLoader`` or ``*loader``).
        eval_loader: whether it iterates over evaluation batches (``val_loader``...).
    """

    __slots__ = ("node", "facts", "no_grad", "cond_depth", "loader", "eval_loader")

    def __init__(self, node: ast.AST, facts: LoopFacts, no_grad: bool, cond_depth: int,
                 loader: bool, eval_loader: bool) -> None:
        self.node = node
        self.facts = facts
        self.no_grad = no_grad
        self.cond_depth = cond_depth
        self.loader = loader
        self.eval_loader = eval_loader

    @property
    def training(self) -> bool:
        return self.facts.training


class FunctionState:
    """The function (or module top level) around the current node.

    Attributes:
        node: the ``FunctionDef`` (or ``Module``).
        name: the function name (``"<module>"`` at top level).
        facts: pre-gathered :class:`~torchmem.lint.facts.FunctionFacts`.
        flow: the data flow environment.
        no_grad: whether the whole function runs without autograd recording.
        class_name: the enclosing class, if the function is a method.
    """

    __slots__ = ("node", "name", "facts", "flow", "no_grad", "class_name", "_eval")

    def __init__(self, node: ast.AST, name: str, facts: FunctionFacts, flow: Flow,
                 no_grad: bool, class_name: str | None) -> None:
        self.node = node
        self.name = name
        self.facts = facts
        self.flow = flow
        self.no_grad = no_grad
        self.class_name = class_name
        self._eval: bool | None = None

    def is_eval(self) -> bool:
        """Evaluation code: named like ``evaluate``/``predict``, or calls ``model.eval()``
        and never ``backward()``/``step()``."""
        if self._eval is None:
            f = self.facts
            named = bool(EVAL_FUNCTION.match(self.name))
            self._eval = (named or bool(f.eval_receivers)) and not f.has_backward \
                and not f.has_step
        return self._eval


class Context:
    """Everything a rule handler may ask about the current node.

    Attributes:
        path: the file name reported in violations.
        source: the text being linted.
        fn: the current :class:`FunctionState`.
        loops: the loops around the current node, innermost last.
        no_grad: > 0 while autograd recording is disabled at the current node.
        cond_depth: how many conditional blocks (``if``, ``except``...) surround the node.
        class_attrs: kinds of ``self.<attr>`` in the current class.
        in_module_class: whether the current class derives from an ``nn.Module``.
        module_classes: names of the classes of this file that derive from ``nn.Module``.
        torch_imported: whether the file imports torch.
    """

    def __init__(self, source: str, path: str) -> None:
        self.path = path
        self.source = source
        self.imports: dict[str, str] = {}
        self.torch_imported = False
        self.module_classes: set[str] = set()
        self.class_attrs: dict[str, int] | None = None
        self.in_module_class = False
        self.fn: FunctionState = None  # type: ignore[assignment]
        self.loops: list[LoopState] = []
        self.no_grad = 0
        self.cond_depth = 0
        #: > 0 inside an ``except`` handler (fallback code for older versions lives there)
        self.handler_depth = 0
        self.violations: list[Violation] = []
        #: per-file scratch space for rules (keyed by rule code)
        self.scratch: dict[str, Any] = {}
        self._lines: list[str] | None = None
        self._qual_cache: dict[int, str | None] = {}

    # -- queries -------------------------------------------------------------------
    @property
    def flow(self) -> Flow:
        return self.fn.flow

    @property
    def loop(self) -> LoopState | None:
        """The innermost loop around the current node."""
        return self.loops[-1] if self.loops else None

    def kind(self, node: ast.AST) -> int:
        """Data-flow kind of an expression (see :mod:`torchmem.lint.dataflow`)."""
        return self.fn.flow.kind(node)

    def qualname(self, node: ast.AST) -> str | None:
        """Fully qualified name of an imported name or attribute chain, else ``None``.

        ``F.cross_entropy`` -> ``"torch.nn.functional.cross_entropy"`` after
        ``import torch.nn.functional as F``.
        """
        if type(node) is ast.Name:
            return self.imports.get(node.id)  # type: ignore[attr-defined]
        root = node
        while type(root) is ast.Attribute:
            root = root.value  # type: ignore[attr-defined]
        if type(root) is not ast.Name:
            return None
        base = self.imports.get(root.id)  # type: ignore[attr-defined]
        if base is None:
            return None
        parts: list[str] = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)  # type: ignore[attr-defined]
            node = node.value  # type: ignore[attr-defined]
        parts.append(base)
        return ".".join(reversed(parts))

    def persistent_loops(self, key: str) -> list[LoopState]:
        """The loops (innermost last) across whose iterations the value of ``key``
        survives: those nested inside the innermost loop that resets it (``acc = 0``,
        ``xs = []``; ``acc += x`` and ``xs.append(x)`` do not reset)."""
        loops = self.loops
        for i in range(len(loops) - 1, -1, -1):
            if key in loops[i].facts.assigned and loops[i].facts.resets(key):
                return loops[i + 1:]
        return list(loops)

    def every_iteration(self, loop: LoopState) -> bool:
        """Whether the current node runs unconditionally on each iteration of ``loop``."""
        return self.cond_depth == loop.cond_depth

    # -- reporting -----------------------------------------------------------------
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = _LINE_SPLIT.split(self.source)
        return self._lines

    def char_col(self, lineno: int, byte_col: int) -> int:
        """Convert ``ast``'s UTF-8 byte column to a character column."""
        lines = self.lines()
        if not 1 <= lineno <= len(lines):
            return byte_col
        line = lines[lineno - 1]
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """``(line, col, end_line, end_col)`` of a node, columns in characters."""
        line = node.lineno  # type: ignore[attr-defined]
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        col = self.char_col(line, node.col_offset)  # type: ignore[attr-defined]
        end = self.char_col(end_line, end_col) if end_col is not None else col
        return line, col, end_line, end

    def text(self, line: int, col: int, end_line: int, end_col: int) -> str:
        """The source text between two character positions."""
        lines = self.lines()
        if line == end_line:
            return lines[line - 1][col:end_col]
        chunk = [lines[line - 1][col:]] + lines[line:end_line - 1] + [lines[end_line - 1][:end_col]]
        return "\n".join(chunk)

    def edit(self, start: tuple[int, int], end: tuple[int, int], text: str) -> Edit:
        """An :class:`Edit` replacing ``start..end`` (character positions) by ``text``."""
        return Edit(start[0], start[1], end[0], end[1], text)

    def report(self, rule: type[Rule] | Rule, node: ast.AST, message: str,
               fix: Sequence[Edit] | None = None) -> None:
        """Record a violation of ``rule`` at ``node`` with an optional fix."""
        line, col, end_line, end_col = self.span(node)
        fx = None
        if fix and rule.fix_title and rule.fix_safety:
            fx = Fix(rule.fix_title, rule.fix_safety, tuple(fix))
        self.violations.append(Violation(self.path, line, col, end_line, end_col, rule.code,
                                         rule.name, message, fx))


# -- dispatch table ---------------------------------------------------------------------
_HOOKS = ("enter_loop", "leave_loop", "enter_function", "leave_function")
_TABLES: dict[tuple[str, ...], tuple[dict[type, list[Callable[..., None]]],
                                     dict[str, list[Callable[..., None]]]]] = {}


def _table(rules: list[type[Rule]]) -> tuple[dict[type, list[Callable[..., None]]],
                                             dict[str, list[Callable[..., None]]]]:
    key = tuple(r.code for r in rules)
    cached = _TABLES.get(key)
    if cached is not None:
        return cached
    nodes: dict[type, list[Callable[..., None]]] = {}
    hooks: dict[str, list[Callable[..., None]]] = {h: [] for h in _HOOKS}
    for cls in rules:
        inst = cls()
        for attr in dir(cls):
            if attr.startswith("visit_"):
                node_type = getattr(ast, attr[6:], None)
                if node_type is None:
                    raise TypeError(f"{cls.code}: no ast node type for handler {attr}")
                nodes.setdefault(node_type, []).append(getattr(inst, attr))
            elif attr in hooks:
                hooks[attr].append(getattr(inst, attr))
    _TABLES[key] = (nodes, hooks)
    return nodes, hooks


# -- the walker -------------------------------------------------------------------------
#: fields that never hold a node worth visiting (operators, contexts, plain values)
_SKIP_FIELDS = frozenset({"ctx", "type_comment", "op", "ops", "attr", "id", "arg", "kind",
                          "conversion", "level", "is_async", "simple", "name", "names",
                          "module", "asname"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    out = _FIELDS.get(cls)
    if out is None:
        out = tuple(f for f in cls._fields if f not in _SKIP_FIELDS)  # type: ignore[attr-defined]
        _FIELDS[cls] = out
    return out


class _Walker:
    def __init__(self, ctx: Context, nodes: dict[type, list[Callable[..., None]]],
                 hooks: dict[str, list[Callable[..., None]]]) -> None:
        self.ctx = ctx
        self.nodes = nodes
        self.hooks = hooks
        self.expr = self._make_expr()

    def _make_expr(self) -> Callable[[ast.AST], None]:
        """Build the expression visitor as a closure (locals are faster than attributes)."""
        get_handlers = self.nodes.get
        ctx = self.ctx
        fields_of = _FIELDS.get
        AST, Name, Constant = ast.AST, ast.Name, ast.Constant
        Lambda, NamedExpr = ast.Lambda, ast.NamedExpr

        def expr(node: ast.AST) -> None:
            """Dispatch every expression node once, in source order."""
            cls = node.__class__
            handlers = get_handlers(cls)
            if handlers:
                for h in handlers:
                    h(node, ctx)
            if cls is Name or cls is Constant:
                return
            if cls is NamedExpr:
                expr(node.value)  # type: ignore[attr-defined]
                ctx.fn.flow.bind(node.target, ctx.kind(node.value))  # type: ignore[attr-defined]
                return
            if cls is Lambda:
                expr(node.body)  # type: ignore[attr-defined]
                return
            for name in fields_of(cls) or _fields(cls):
                value = getattr(node, name)
                if value.__class__ is list:
                    for item in value:
                        if isinstance(item, AST):
                            expr(item)
                elif value is not None and isinstance(value, AST):
                    expr(value)

        return expr

    def exprs(self, nodes: Iterable[ast.AST | None]) -> None:
        for node in nodes:
            if node is not None:
                self.expr(node)

    # statements: in execution order, with the data flow
    def stmts(self, body: list[ast.stmt]) -> None:
        for node in body:
            self.stmt(node)

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
            self._effects(node.value)  # type: ignore[attr-defined]
        elif cls is ast.Assign:
            self.expr(node.value)  # type: ignore[attr-defined]
            self.exprs(node.targets)  # type: ignore[attr-defined]
            kind = flow.kind(node.value)  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                if type(target) is ast.Attribute and target.attr == "requires_grad":
                    self._requires_grad(target.value, node.value)  # type: ignore[attr-defined]
                    continue
                value = node.value  # type: ignore[attr-defined]
                if isinstance(value, ast.Tuple) and isinstance(target, ast.Tuple) and len(
                        target.elts) == len(value.elts):
                    for t, v in zip(target.elts, value.elts):
                        flow.bind(t, flow.kind(v))
                else:
                    flow.bind(target, kind)
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
            self._branches([node.body, node.orelse])  # type: ignore[attr-defined]
        elif cls is ast.With or cls is ast.AsyncWith:
            self._with(node)
        elif cls is ast.Try or cls.__name__ == "TryStar":
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
            self._import(node)
        elif cls.__name__ == "Match":
            self.expr(node.subject)  # type: ignore[attr-defined]
            bodies = []
            for case in node.cases:  # type: ignore[attr-defined]
                self.expr(case.pattern)
                self.expr_opt(case.guard)
                bodies.append(case.body)
            self._branches(bodies + [[]])
        else:
            for name in _fields(cls):
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

    def _args(self, args: ast.arguments) -> None:
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            self.expr_opt(a.annotation)
        self.exprs(args.defaults)
        self.exprs(args.kw_defaults)

    def _effects(self, value: ast.expr) -> None:
        """Statement-level calls that change the flow: ``h.detach_()``, ``torch.set_grad_enabled``."""
        if type(value) is not ast.Call:
            return
        func = value.func
        ctx = self.ctx
        if type(func) is ast.Attribute:
            key = key_of(func.value)
            if func.attr == "detach_" and key:
                ctx.fn.flow.env[key] = (ctx.fn.flow.env.get(key, 0) & TYPE) | 4
            elif func.attr == "requires_grad_" and key:
                self._requires_grad(func.value, value.args[0] if value.args else None)
            elif func.attr == "eval" and key and not value.args:
                ctx.fn.flow.env[key] = ctx.fn.flow.env.get(key, 0) | MODEL
        qual = ctx.qualname(func)
        if qual == "torch.set_grad_enabled" or qual == "torch.autograd.set_grad_enabled":
            arg = value.args[0] if value.args else None
            enabled = isinstance(arg, ast.Constant) and arg.value is True
            ctx.no_grad = 0 if enabled else max(ctx.no_grad, 1)

    def _requires_grad(self, target: ast.expr, value: ast.expr | None) -> None:
        key = key_of(target)
        if key is None:
            return
        env = self.ctx.fn.flow.env
        on = value is None or (isinstance(value, ast.Constant) and value.value is True)
        off = isinstance(value, ast.Constant) and value.value is False
        old = env.get(key, 0)
        if on:
            env[key] = (old & TYPE) | 2
        elif off:
            env[key] = (old & TYPE) | (4 if old & VALUE else 0)
        else:
            env[key] = old & TYPE

    def _import(self, node: ast.stmt) -> None:
        ctx = self.ctx
        if type(node) is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.asname:
                    ctx.imports[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    ctx.imports[top] = top
                if alias.name.partition(".")[0] == "torch":
                    ctx.torch_imported = True
        else:
            mod = node.module or ""  # type: ignore[attr-defined]
            if node.level:  # type: ignore[attr-defined]
                mod = "." * node.level + mod  # type: ignore[attr-defined]
            if mod.partition(".")[0] == "torch":
                ctx.torch_imported = True
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name != "*":
                    ctx.imports[alias.asname or alias.name] = f"{mod}.{alias.name}"

    def _branches(self, bodies: list[list[ast.stmt]]) -> None:
        ctx = self.ctx
        flow = ctx.fn.flow
        start = flow.env
        ends: list[dict[str, int]] = []
        no_grad0 = ctx.no_grad
        ctx.cond_depth += 1
        for body in bodies:
            flow.env = dict(start)
            ctx.no_grad = no_grad0
            self.stmts(body)
            if not (body and isinstance(body[-1], _EXITS)):
                ends.append(flow.env)
        ctx.cond_depth -= 1
        ctx.no_grad = no_grad0
        if not ends:
            flow.env = start
            return
        env = ends[0]
        for other in ends[1:]:
            env = meet(env, other)
        flow.env = env

    def _with(self, node: ast.stmt) -> None:
        ctx = self.ctx
        delta = 0
        for item in node.items:  # type: ignore[attr-defined]
            self.expr(item.context_expr)
            expr = item.context_expr
            func = expr.func if type(expr) is ast.Call else expr
            qual = ctx.qualname(func)
            if qual in NO_GRAD_CONTEXTS:
                delta += 1
            elif qual in ENABLE_GRAD_CONTEXTS:
                delta -= 10_000
            elif qual in ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled"):
                arg = expr.args[0] if type(expr) is ast.Call and expr.args else None
                if not (isinstance(arg, ast.Constant) and arg.value is True):
                    delta += 1
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
        flow.env = meet(before, flow.env)
        self.stmts(node.orelse)  # type: ignore[attr-defined]

    def _class(self, node: ast.ClassDef) -> None:
        ctx = self.ctx
        self.exprs(node.decorator_list)
        self.exprs(node.bases)
        self.exprs(kw.value for kw in node.keywords)
        is_module = _is_module_class(node, ctx)
        if is_module:
            ctx.module_classes.add(node.name)
        saved = (ctx.class_attrs, ctx.in_module_class)
        ctx.class_attrs = self._class_attrs(node)
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

    def _class_attrs(self, node: ast.ClassDef) -> dict[str, int]:
        """Kinds of ``self.<attr> = value`` assignments in the class's set-up methods."""
        ctx = self.ctx
        attrs: dict[str, int] = {}
        probe = Flow(ctx, FunctionFacts(), {})
        saved_fn, saved_ng = ctx.fn, ctx.no_grad
        ctx.fn = FunctionState(node, node.name, probe.facts, probe, False, node.name)
        ctx.no_grad = 0
        stack: list[ast.AST] = [s for s in node.body if type(s) in _FUNC_TYPES
                                and s.name in _SETUP_METHODS]  # type: ignore[attr-defined]
        while stack:
            item = stack.pop()
            if type(item) is ast.Assign:
                kind = probe.kind(item.value)  # type: ignore[attr-defined]
                for target in item.targets:  # type: ignore[attr-defined]
                    if type(target) is ast.Attribute and type(target.value) is ast.Name \
                            and target.value.id == "self":
                        attrs[target.attr] = attrs.get(target.attr, 0) | kind
            elif type(item) is ast.Expr and type(item.value) is ast.Call:  # type: ignore[attr-defined]
                call = item.value  # type: ignore[attr-defined]
                f = call.func
                if type(f) is ast.Attribute and f.attr in ("register_buffer", "register_parameter") \
                        and len(call.args) >= 2 and isinstance(call.args[0], ast.Constant) \
                        and isinstance(call.args[0].value, str):
                    attrs[call.args[0].value] = 2 if f.attr == "register_parameter" else 4
            for name in ("body", "orelse", "handlers", "finalbody"):
                sub = getattr(item, name, None)
                if sub:
                    stack.extend(s for s in sub if type(s) is not ast.ClassDef)
        ctx.fn, ctx.no_grad = saved_fn, saved_ng
        return attrs

    def function(self, node: ast.AST, body: list[ast.stmt], name: str,
                 args: ast.arguments | None, decorators: list[ast.expr] | None = None, *,
                 class_name: str | None = None, force_no_grad: bool = False) -> None:
        ctx = self.ctx
        facts = _facts.gather(body, ctx.qualname)
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
            for a in args.posonlyargs + args.args + args.kwonlyargs:
                kind = flow.initial_kind(a.arg, a.annotation)
                if kind:
                    env[a.arg] = kind
                else:
                    env.pop(a.arg, None)
        no_grad = force_no_grad or any(
            ctx.qualname(d.func if type(d) is ast.Call else d) in NO_GRAD_CONTEXTS
            for d in decorators or ())
        state.no_grad = no_grad
        saved = (ctx.fn, ctx.loops, ctx.no_grad, ctx.cond_depth, ctx.handler_depth)
        ctx.fn, ctx.loops, ctx.no_grad, ctx.cond_depth, ctx.handler_depth = (
            state, [], int(no_grad), 0, 0)
        for h in self.hooks["enter_function"]:
            h(state, ctx)
        self.stmts(body)
        for h in self.hooks["leave_function"]:
            h(state, ctx)
        ctx.fn, ctx.loops, ctx.no_grad, ctx.cond_depth, ctx.handler_depth = saved


def _is_module_class(node: ast.ClassDef, ctx: Context) -> bool:
    if any(type(s) in _FUNC_TYPES and s.name == "forward" for s in node.body):  # type: ignore[attr-defined]
        return True  # only modules define forward()
    for base in node.bases:
        key = key_of(base)
        if key is None:
            continue
        qual = ctx.qualname(base) or key
        tail = last_name(qual)
        if qual.startswith("torch.nn") or tail in ctx.module_classes or tail in (
                "Module", "LightningModule", "PreTrainedModel") or tail.endswith("Module"):
            return True
    return False


# -- public entry point -----------------------------------------------------------------
def _top_level(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Import statements of the module top level (inside ``if``/``try`` too)."""
    for stmt in body:
        t = type(stmt)
        if t is ast.Import or t is ast.ImportFrom:
            yield stmt
        elif t is ast.If or t is ast.Try:
            for name in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(stmt, name, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _top_level(handler.body)


def _noqa_filter(violations: list[Violation], ctx: Context) -> list[Violation]:
    if "noqa" not in ctx.source and "NOQA" not in ctx.source.upper():
        return violations
    lines = ctx.lines()
    kept: list[Violation] = []
    for v in violations:
        line = lines[v.line - 1] if v.line <= len(lines) else ""
        match = _NOQA.search(line) if "#" in line else None
        if match is None:
            kept.append(v)
            continue
        codes = match.group("codes")
        if not codes:
            continue  # bare "# noqa" silences everything on the line
        wanted = [c.upper() for c in re.split(r"[,\s]+", codes) if c]
        if not any(v.code.startswith(c) for c in wanted):
            kept.append(v)
    return kept


def parse(text: str, path: str = "<string>") -> ast.Module:
    """Parse Python source, turning every failure into :class:`LintSyntaxError`."""
    try:
        return ast.parse(text, filename=path, type_comments=False)
    except SyntaxError as err:
        line = err.lineno or 1
        col = max((err.offset or 1) - 1, 0)
        msg = err.msg or "invalid syntax"
        raise LintSyntaxError(f"{path}:{line}:{col + 1}: not valid Python: {msg}", path=path,
                              line=line, col=col,
                              tip="fix the syntax error; the file was not linted") from None
    except (ValueError, TypeError) as err:  # e.g. null bytes on older Pythons
        raise LintSyntaxError(f"{path}: cannot be parsed as Python: {err}", path=path,
                              tip="is this a Python source file?") from None
    except (RecursionError, MemoryError):
        raise LintSyntaxError(f"{path}: expressions nested too deeply to parse", path=path,
                              tip="exclude this (probably generated) file") from None


def lint_source(text: str, path: str = "<string>", *, select: Iterable[str] | None = None,
                ignore: Iterable[str] | None = None) -> list[Violation]:
    """Lint one Python source string and return its violations, ordered by position.

    Args:
        text: the Python source.
        path: the file name used in the violations.
        select: rule codes, prefixes (``TMM1``) or ``ALL``; ``None`` means the default set
            (every rule except the opinionated ``TMM9xx``).
        ignore: codes or prefixes to leave out (wins over ``select``).

    Returns:
        Violations sorted by line, column and code; ``# noqa`` comments already applied.

    Raises:
        LintSyntaxError: ``text`` is not valid Python (line and column attached).
        UsageError: ``select``/``ignore`` name an unknown code.

    Example:
        >>> lint_source("import torch\\nw = torch.zeros(2, requires_grad=True)\\nw.add_(1)\\n")[0].code
        'TMM403'
    """
    if isinstance(select, str):
        select = [select]
    if isinstance(ignore, str):
        ignore = [ignore]
    rules = select_rules(list(select) if select is not None else None,
                         list(ignore) if ignore else None)
    if text.startswith("\ufeff"):
        text = text[1:]
    tree = parse(text, path)
    ctx = Context(text, path)
    if not rules:
        return []
    nodes, hooks = _table(rules)
    walker = _Walker(ctx, nodes, hooks)
    for stmt in _top_level(tree.body):
        walker._import(stmt)
    limit = sys.getrecursionlimit()
    try:
        # anything ast.parse accepts (long operator chains) must not exhaust the default limit
        sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
        walker.function(tree, tree.body, "<module>", None)
    except RecursionError:
        raise LintSyntaxError(f"{path}: code nested too deeply to analyse", path=path,
                              tip="exclude this (probably generated) file") from None
    finally:
        sys.setrecursionlimit(limit)
    found = _noqa_filter(ctx.violations, ctx)
    unique = {(v.line, v.col, v.code): v for v in found}
    return sorted(unique.values(), key=Violation.sort_key)


def _debug_kinds(text: str) -> dict[str, Any]:  # pragma: no cover - developer aid
    """Return the final environment of the module top level (for debugging rules)."""
    tree = parse(text)
    ctx = Context(text, "<string>")
    walker = _Walker(ctx, {}, {h: [] for h in _HOOKS})
    captured: dict[str, Any] = {}

    def grab(state: FunctionState, c: Context) -> None:
        captured[state.name] = dict(state.flow.env)

    walker.hooks["leave_function"].append(grab)
    walker.function(tree, tree.body, "<module>", None)
    return captured
