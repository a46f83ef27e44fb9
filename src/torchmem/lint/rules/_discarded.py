"""Inference code found by what it does with its outputs: forward passes whose graph the
function itself throws away (no torch).

``tfX = self(tX); fX.append(tfX.detach().cpu().numpy())`` in ``slide()``,
``out = model(image, mask); res = out[0].permute(1, 2, 0).detach().cpu().numpy()`` in a
server's ``run()``: each forward pass records a graph and saves activations, and the only
things the function does with the output drop the graph (``.detach()``, ``.numpy()``,
``.tolist()``, ``.item()``, ``.data``, ``float()``). When every forward pass of a function
that runs outside ``no_grad`` is like that, and the function neither differentiates nor
hands a graph to anyone (nothing is returned, stored or given to an unknown call that is not
itself detached), the graph is never used: the function is inference code.

Healthy code with the same shape is left alone: a forward pass whose output (or a value
computed from it) is returned, yielded, stored on an object, appended or given to a helper
whose result is kept (its caller may differentiate it); a function that calls
``backward()``/``step()``/``torch.autograd.grad`` (or a function of the file that does), or
asks for input gradients (``requires_grad_()``, ``.grad``, ``retain_grad()``: saliency,
attacks, attributions); a module's own ``forward``; code run under ``no_grad`` by a
decorator or by its callers.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from torchmem.lint.callers import mentions_no_grad
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import (NO_GRAD_CONTEXTS, is_constructor_name, is_model_name,
                                     is_no_grad_decorator)
from torchmem.lint.rules._base_hooks import base_hook
from torchmem.lint.rules._common import describe

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["message", "note_forward", "thrown_away"]

#: scratch key: function id -> the forward passes run outside no_grad
_FORWARDS = "TMM103.forwards"
#: scratch key: the functions of the file called at least once under no_grad
_QUIET = "TMM103.no_grad_callees"
#: scratch key: the names the file handles as modules with weights
_MODULES = "TMM103.file_modules"
_MODE_SWITCH = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\.(train|eval)\(\s*\)")
_LOADED = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\.load_state_dict\(")
#: scratch key: (function id, parameter) -> whether the function drops the argument's graph
_DROPS = "TMM103.helper_drops"
#: methods and attributes whose result has no autograd history
_DROP_METHODS = frozenset({"detach", "numpy", "tolist", "item", "argmax", "argmin"})
_DROP_FUNCS = frozenset({"float", "int", "bool"})
#: attributes and calls that read a tensor's metadata: neither keep nor need its graph
_META = frozenset({"shape", "device", "dtype", "ndim", "size", "dim", "numel", "is_cuda",
                   "requires_grad"})
_META_FUNCS = frozenset({"len", "isinstance", "type", "print", "id"})
#: what a function that needs input gradients mentions
_GRAD_ATTRS = frozenset({"requires_grad_", "retain_grad", "grad", "register_hook"})
#: what :func:`thrown_away` found: every forward pass of a function that does not
#: differentiate thrown away, one of them, or one in a function that differentiates
_EVERY, _SOME, _TRAINS = 0, 1, 2
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_KEPT, _NEUTRAL, _DROPPED = -1, 0, 1


def note_forward(call: ast.Call, ctx: Context) -> None:
    """Record ``call`` when it runs, outside ``no_grad``, a module known by name to have
    weights (``model(x)``, ``self.encoder(x)``, ``self(x)`` in a module), for
    :func:`thrown_away`. ``Model(envs)`` of a parameter named like a class builds an object;
    ``self.drop(ones)`` of a module not named like a model records no graph worth a
    finding. ``self.gen(z)`` counts when the file handles ``self.gen`` as a module with
    weights (:func:`_file_modules`)."""
    func = call.func
    if type(func) is ast.Attribute and func.attr == "forward":
        func = func.value
    if _weighted(call, ctx) and ctx.flow.is_forward(call, strict=True) or \
            type(func) is not ast.Name and key_of(func) in _file_modules(ctx):
        ctx.scratch.setdefault(_FORWARDS, {}).setdefault(id(ctx.fn.node), []).append(call)


def thrown_away(ctx: Context) -> tuple[ast.Call, int] | None:
    """The first forward pass of the current function, run outside ``no_grad``, whose
    graph the function throws away itself (or a helper of the file it hands the output
    to), and what the function does besides (see ``_EVERY``); ``None`` when there is
    none."""
    calls = ctx.scratch.get(_FORWARDS, {}).pop(id(ctx.fn.node), None)
    fn = ctx.fn
    node = fn.node
    if not calls or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            node.name in ("forward", "__call__") or node.name.startswith("test_"):
        return None  # a pytest test: one small forward pass, never worth a no_grad
    walk = _walker(node, ctx)
    body = walk.body
    if _wants_grad(body) or base_hook(ctx) or \
            ("self" if fn.class_name else None, node.name) in _no_grad_callees(ctx):
        return None
    facts = fn.facts
    trains = bool(facts.has_backward or facts.has_step or facts.grad_calls) or \
        _calls_backward(body, ctx)
    fates = [(walk.fate(call), call) for call in calls]
    dropped = [call for fate, call in fates if fate == _DROPPED]
    if not dropped:
        return None
    first = min(dropped, key=lambda c: (c.lineno, c.col_offset))
    if trains:
        return first, _TRAINS
    return first, _EVERY if len(dropped) == len(fates) else _SOME


def message(call: ast.Call, name: str, kind: int) -> str:
    """The finding's text for :func:`thrown_away`'s answer."""
    where = (f"in {name}() whose every forward pass has its output detached or copied to "
             f"the host and which never differentiates" if kind == _EVERY else
             f"in {name}(){', which differentiates other values,' if kind == _TRAINS else ','}"
             f" its output is only detached or copied to the host (here or by a helper it "
             f"is handed to)")
    return (f"forward pass {describe(call.func)}() outside torch.no_grad(), {where}: "
            f"autograd records a graph and saves activations that nothing uses; run it "
            f"under torch.no_grad() or torch.inference_mode()")


def _walker(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, ctx: Context,
            helpers: bool = True) -> _Walk:
    """A :class:`_Walk` over the body of ``node`` (``helpers``: follow values into the
    functions of the file they are handed to)."""
    body = _own_nodes(node)
    parents: dict[int, ast.AST] = {}
    names: dict[str, list[ast.Name]] = {}
    nested: set[str] = set()  # names a nested function or lambda reads: kept by it
    for parent in body:
        if isinstance(parent, _SCOPES):
            nested.update(n.id for n in ast.walk(parent) if type(n) is ast.Name)
            continue
        for child in ast.iter_child_nodes(parent):
            parents[id(child)] = parent
        if type(parent) is ast.Name and type(parent.ctx) is ast.Load:
            names.setdefault(parent.id, []).append(parent)
    return _Walk(parents, names, frozenset(nested), ctx, body, helpers)


def _weighted(call: ast.Call, ctx: Context) -> bool:
    """Whether ``call`` runs a module named like one with weights (see ``has_weights``)."""
    func = call.func
    if type(func) is ast.Name:
        if func.id == "self":
            return ctx.in_module_class
        return not is_constructor_name(func.id) and is_model_name(func.id)
    if type(func) is not ast.Attribute:
        return False
    if is_model_name(func.attr):
        return True
    func = func.value  # model.decode(x), self.net.forward(x)
    name = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute \
        else None
    return name is not None and is_model_name(name)


def _file_modules(ctx: Context) -> frozenset[str]:
    """The names and attributes (``"self.gen"``) that the file handles as modules with
    weights, whatever their name: it loads a state dict into them, or switches them both to
    training and to eval mode (``.train()`` and ``.eval()``). (Asking for their
    ``.parameters()`` is not enough: frameworks' module containers hand out the
    parameters of detectors and heads that their evaluation hooks run under
    ``no_grad``.) Read from the source text, once per file."""
    memo = ctx.scratch.get(_MODULES)
    if memo is not None:
        return memo
    source = ctx.source or ""
    found = set(_LOADED.findall(source))
    modes: dict[str, set[str]] = {}
    for key, mode in _MODE_SWITCH.findall(source):
        modes.setdefault(key, set()).add(mode)
    found.update(k for k, m in modes.items() if len(m) == 2)
    memo = ctx.scratch[_MODULES] = frozenset(found)
    return memo


def _no_grad_callees(ctx: Context) -> set[tuple[str | None, str]]:
    """The functions (``(None, name)``) and methods (``("self", name)``) of the file that a
    call inside a ``no_grad`` block, or in a function decorated so, runs: their author runs
    them without recording where it matters, the other calls may want the graph."""
    memo = ctx.scratch.get(_QUIET)
    if memo is not None:
        return memo
    memo = ctx.scratch[_QUIET] = set()
    tree = ctx.tree
    if tree is None or not mentions_no_grad(ctx.source):
        return memo

    def name(expr: ast.expr) -> str | None:
        return ctx.qualname(expr.func if type(expr) is ast.Call else expr)  # type: ignore[attr-defined]

    for node in ast.walk(tree):
        if type(node) in (ast.With, ast.AsyncWith):
            quiet: list[ast.AST] = node.body if any(  # type: ignore[attr-defined]
                name(i.context_expr) in NO_GRAD_CONTEXTS for i in node.items) else []  # type: ignore[attr-defined]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            quiet = node.body if any(is_no_grad_decorator(name(d))
                                     for d in node.decorator_list) else []
        else:
            continue
        for sub in (n for stmt in quiet for n in ast.walk(stmt)):
            if type(sub) is ast.Call:
                func = sub.func
                if type(func) is ast.Name:
                    memo.add((None, func.id))
                elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                        func.value.id == "self":
                    memo.add(("self", func.attr))
    return memo


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of ``fn``'s body (its decorators, nested functions and classes aside)."""
    out: list[ast.AST] = []
    body = fn.body  # type: ignore[attr-defined]
    todo: list[ast.AST] = list(body) if type(body) is list else [body]  # a lambda's
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _wants_grad(body: list[ast.AST]) -> bool:
    """Whether the function asks for gradients of its inputs (or hooks them)."""
    for node in body:
        if type(node) is ast.Attribute and node.attr in _GRAD_ATTRS:
            return True
        if type(node) is ast.keyword and node.arg == "requires_grad":
            return True
    return False


def _calls_backward(body: list[ast.AST], ctx: Context) -> bool:
    """Whether a function of the file called here runs ``backward()``."""
    summaries = ctx.summaries
    if summaries is None:
        return False
    for node in body:
        if type(node) is ast.Call:
            callee = summaries.resolve(node.func, ctx.flow)
            if callee is not None and summaries._runs_backward(callee.node):
                return True
    return False


class _Walk:
    """Follows a value through the function: the statements that read it, and the names
    it is bound to."""

    __slots__ = ("parents", "names", "nested", "ctx", "seen", "body", "helpers")

    def __init__(self, parents: dict[int, ast.AST], names: dict[str, list[ast.Name]],
                 nested: frozenset[str], ctx: Context, body: list[ast.AST],
                 helpers: bool) -> None:
        self.parents = parents
        self.names = names
        self.nested = nested
        self.ctx = ctx
        self.seen: set[str] = set()
        self.body = body
        self.helpers = helpers

    def fate(self, node: ast.AST) -> int:
        """What the function does with the value of ``node``: drops its graph
        (``_DROPPED``), reads only its metadata (``_NEUTRAL``), or keeps or hands it on
        (``_KEPT``)."""
        parents = self.parents
        cur = node
        opaque = False  # passed through a call of unknown effect: must be dropped right here
        while True:
            parent = parents.get(id(cur))
            t = type(parent)
            if t is ast.Attribute:
                above = parents.get(id(parent))
                called = type(above) is ast.Call and above.func is parent  # type: ignore[union-attr]
                attr = parent.attr  # type: ignore[union-attr]
                if attr in _DROP_METHODS and called or attr == "data":
                    return _DROPPED
                if attr in _META:
                    return _NEUTRAL
                if attr == "backward":
                    return _KEPT  # differentiated
                cur = above if called else parent  # out.permute(...), outputs.logits
                continue
            if t is ast.Subscript:
                if parent.value is not cur:  # type: ignore[union-attr]
                    return _NEUTRAL  # used as an index
                cur = parent
                continue
            if t in (ast.BinOp, ast.UnaryOp, ast.Starred, ast.keyword, ast.Tuple, ast.List):
                cur = parent
                continue
            if t is ast.Compare:
                return _NEUTRAL
            if t is ast.Call:
                func = parent.func  # type: ignore[union-attr]
                name = func.id if type(func) is ast.Name else None
                called = name or (func.attr if type(func) is ast.Attribute else "")
                if func is not cur and ("backward" in called or called == "grad"):
                    return _KEPT  # dist_autograd.backward(cid, [loss]), autograd.grad(y, x)
                if name in _META_FUNCS:
                    return _NEUTRAL
                if name in _DROP_FUNCS:
                    return _DROPPED
                if func is not cur and self._drops(parent, cur):  # type: ignore[arg-type]
                    return _DROPPED  # map(lambda x: x.detach(), v), a helper that detaches
                if not (self.ctx.qualname(func) or "").startswith("torch."):
                    opaque = True  # embedding_func(x).detach() is dropped; y = f(x) unknown
                cur = parent
                continue
            if t is ast.Expr or t is ast.If or t is ast.While:
                return _KEPT if opaque else _NEUTRAL
            if t is ast.Assign and parent.value is cur and not opaque:  # type: ignore[union-attr]
                return self.bound(parent.targets)  # type: ignore[union-attr]
            return _KEPT  # returned, yielded, stored, iterated, augmented...

    def bound(self, targets: list[ast.expr]) -> int:
        """The fate of a value bound to ``targets``: that of every read of those names."""
        names: list[str] = []
        for target in targets:
            elts = target.elts if type(target) in (ast.Tuple, ast.List) else [target]  # type: ignore[attr-defined]
            for elt in elts:
                if type(elt) is ast.Starred:
                    elt = elt.value
                if type(elt) is not ast.Name or elt.id in self.nested:
                    return _KEPT  # self.out = ..., cache[k] = ..., read by a closure
                names.append(elt.id)
        return self.reads(names, self.names)

    def reads(self, names: list[str], uses: dict[str, list[ast.Name]]) -> int:
        """The fate of the values of ``names``: that of every read of them in ``uses``."""
        out = _NEUTRAL
        for name in names:
            if name in self.seen:
                continue
            self.seen.add(name)
            for use in uses.get(name, ()):
                fate = self.fate(use)
                if fate == _KEPT:
                    return _KEPT
                out = max(out, fate)
        return out

    def _drops(self, call: ast.Call, arg: ast.expr) -> bool:
        """Whether ``call`` drops the graph of its argument ``arg``: ``map()`` of a lambda
        that detaches its parameter, or a function of the file whose parameter is only
        detached or copied to the host there, and not returned (followed one call deep)."""
        func = call.func
        if type(func) is ast.Name and func.id == "map" and len(call.args) == 2 and \
                type(call.args[0]) is ast.Lambda and call.args[1] is arg:
            lam = call.args[0]
            params = [a.arg for a in lam.args.args]
            return len(params) == 1 and _param_fate(lam, params[0], self.ctx, False) \
                == _DROPPED
        found = _helper(func, self.ctx) if self.helpers else None
        if found is None:
            return False
        fn, params = found
        if arg in call.args:
            index = call.args.index(arg)
            if any(type(a) is ast.Starred for a in call.args[:index + 1]) or \
                    index >= len(params):
                return False
            param = params[index]
        else:
            return False  # a keyword argument: left alone
        memo = self.ctx.scratch.setdefault(_DROPS, {})
        key = (id(fn), param)
        if key not in memo:
            memo[key] = _param_fate(fn, param, self.ctx, False) == _DROPPED
        return memo[key]


def _helper(func: ast.expr, ctx: Context
            ) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[str]] | None:
    """The function of the file that ``func(...)`` calls (``helper(x)``,
    ``self.method(x)``, a static method included) and the parameters its positional
    arguments bind."""
    summaries = ctx.summaries
    if summaries is None:
        return None
    fn = None
    bound = False
    if type(func) is ast.Name:
        fn = summaries.functions.get(func.id)
    elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
            func.value.id == "self" and ctx.fn.class_name in summaries.classes:
        cls = summaries.classes[ctx.fn.class_name]  # type: ignore[index]
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    stmt.name == func.attr:
                decorators = {key_of(d) for d in stmt.decorator_list}
                if "property" not in decorators:
                    fn, bound = stmt, "staticmethod" not in decorators
                break
        else:
            fn, bound = summaries._method(cls, func.attr), True
    if fn is None:
        return None
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return fn, params[1:] if bound else params


def _param_fate(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, param: str,
                ctx: Context, helpers: bool) -> int:
    """What ``fn`` does with its parameter ``param``: its reads up to the statement of the
    body that binds the name again."""
    walk = _walker(fn, ctx, helpers)
    if param in walk.nested:
        return _KEPT
    uses = walk.names.get(param, [])
    if type(fn) is not ast.Lambda:
        for stmt in fn.body:  # type: ignore[union-attr]
            if type(stmt) is ast.Assign and any(
                    type(t) is ast.Name and t.id == param for t in stmt.targets):
                end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
                uses = [u for u in uses if (u.lineno, u.col_offset) < end]
                break
    return walk.reads([param], {param: uses}) if uses else _NEUTRAL
