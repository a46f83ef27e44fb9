"""What a function does with a value: drops its graph, reads its metadata, or keeps it
(no torch). Used by :mod:`torchmem.lint.rules._discarded` to find forward passes whose
graph the function throws away.

A value is followed through the expressions that read it and the names it is bound to:
``.detach()``, ``.numpy()``, ``.tolist()``, ``.item()``, ``.data``, ``float()`` drop its
graph; ``.shape``, ``len()``, comparisons read metadata; returning, yielding, storing,
iterating it, handing it to a call of unknown effect or to ``backward()`` keeps it; the
output of a module named like a model that it is given is followed in its place. A
helper of the file it is handed to (``self.create_grid(self.gen(z), files)``, a static
method included) is read one call deep: when its parameter is only dropped there (up to
the statement that binds the name again), the argument's graph is dropped; so is the
graph of ``map(lambda x: x.detach(), values)``.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import is_constructor_name, is_model_name, last_name

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["DROPPED", "KEPT", "NEUTRAL", "walker"]

#: scratch key: (function id, parameter) -> whether the function drops the argument's graph
_DROPS = "TMM103.helper_drops"
#: methods and attributes whose result has no autograd history
_DROP_METHODS = frozenset({"detach", "numpy", "tolist", "item", "argmax", "argmin"})
_DROP_FUNCS = frozenset({"float", "int", "bool"})
#: attributes and calls that read a tensor's metadata: neither keep nor need its graph
_META = frozenset({"shape", "device", "dtype", "ndim", "size", "dim", "numel", "is_cuda",
                   "requires_grad"})
_META_FUNCS = frozenset({"len", "isinstance", "type", "print", "id"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
KEPT, NEUTRAL, DROPPED = -1, 0, 1


def walker(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, ctx: Context,
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


class _Walk:
    """Follows a value through the function: the statements that read it, and the names
    it is bound to."""

    __slots__ = ("body", "ctx", "helpers", "names", "nested", "parents", "seen")

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

    def start(self, node: ast.AST) -> int:
        """:meth:`fate` of ``node``, with no name followed yet (a name bound again to
        another value, ``output = netD(fake)`` after ``output = netD(real)``, is read
        again)."""
        self.seen = set()
        return self.fate(node)

    def fate(self, node: ast.AST) -> int:
        """What the function does with the value of ``node``: drops its graph
        (``DROPPED``), reads only its metadata (``NEUTRAL``), or keeps or hands it on
        (``KEPT``)."""
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
                    return DROPPED
                if attr in _META:
                    return NEUTRAL
                if attr == "backward":
                    return KEPT  # differentiated
                cur = above if called else parent  # out.permute(...), outputs.logits
                continue
            if t is ast.Subscript:
                if parent.value is not cur:  # type: ignore[union-attr]
                    return NEUTRAL  # used as an index
                cur = parent
                continue
            if t in (ast.BinOp, ast.UnaryOp, ast.Starred, ast.keyword, ast.Tuple, ast.List):
                cur = parent
                continue
            if t is ast.Compare:
                return NEUTRAL
            if t is ast.Call:
                func = parent.func  # type: ignore[union-attr]
                name = func.id if type(func) is ast.Name else None
                what = name or (func.attr if type(func) is ast.Attribute else "")
                if func is not cur and ("backward" in what or what == "grad"):
                    return KEPT  # dist_autograd.backward(cid, [loss]), autograd.grad(y, x)
                if name in _META_FUNCS:
                    return NEUTRAL
                if name in _DROP_FUNCS:
                    return DROPPED
                if func is not cur and self._drops(parent, cur):  # type: ignore[arg-type]
                    return DROPPED  # map(lambda x: x.detach(), v), a helper that detaches
                if not (self.ctx.qualname(func) or "").startswith("torch.") and not (
                        func is not cur and _module_call(func)):
                    opaque = True  # embedding_func(x).detach() is dropped; y = f(x) unknown
                cur = parent
                continue
            if t is ast.Expr or t is ast.If or t is ast.While:
                return KEPT if opaque else NEUTRAL
            if t is ast.Assign and parent.value is cur and not opaque:  # type: ignore[union-attr]
                return self.bound(parent.targets)  # type: ignore[union-attr]
            return KEPT  # returned, yielded, stored, iterated, augmented...

    def bound(self, targets: list[ast.expr]) -> int:
        """The fate of a value bound to ``targets``: that of every read of those names."""
        names: list[str] = []
        for target in targets:
            elts = target.elts if type(target) in (ast.Tuple, ast.List) else [target]  # type: ignore[attr-defined]
            for elt in elts:
                if type(elt) is ast.Starred:
                    elt = elt.value
                if type(elt) is not ast.Name or elt.id in self.nested:
                    return KEPT  # self.out = ..., cache[k] = ..., read by a closure
                names.append(elt.id)
        return self.reads(names, self.names)

    def reads(self, names: list[str], uses: dict[str, list[ast.Name]]) -> int:
        """The fate of the values of ``names``: that of every read of them in ``uses``."""
        out = NEUTRAL
        for name in names:
            if name in self.seen:
                continue
            self.seen.add(name)
            for use in uses.get(name, ()):
                fate = self.fate(use)
                if fate == KEPT:
                    return KEPT
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
                == DROPPED
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
            memo[key] = _param_fate(fn, param, self.ctx, False) == DROPPED
        return memo[key]


def _module_call(func: ast.expr) -> bool:
    """Whether ``func(x)`` runs a module named like a model (``self.rssm.recurrent_model``,
    ``decoder``): its output carries the graph of its input, followed like a tensor
    operation's."""
    key = key_of(func)
    if key is None:
        return False
    name = last_name(key)
    return not is_constructor_name(name) and is_model_name(name)


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
    walk = walker(fn, ctx, helpers)
    if param in walk.nested:
        return KEPT
    uses = walk.names.get(param, [])
    if type(fn) is not ast.Lambda:
        for stmt in fn.body:  # type: ignore[union-attr]
            if type(stmt) is ast.Assign and any(
                    type(t) is ast.Name and t.id == param for t in stmt.targets):
                end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
                uses = [u for u in uses if (u.lineno, u.col_offset) < end]
                break
    return walk.reads([param], {param: uses}) if uses else NEUTRAL
