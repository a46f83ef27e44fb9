"""Which functions of a file run again and again: called from a loop, directly or through
other functions and constructors of the same file (no torch).

A loop's call counts when the loop has no ``break`` of its own and no ``if`` around the call
tests the loop's variables (``if rank == r:`` runs for one pass). With the same inputs on
every pass, when none of its arguments mentions those variables: the
``for trial in range(40): MRFI(model, cfg)`` loop makes a new object from the same inputs on
every pass, while ``for layer in layers: Probe(layer)`` makes one per layer. From each such
call the set grows through the file's own code: a function called by a repeated function
is repeated; a class constructed there runs its ``__init__`` (its own, or that of a base
class of the file) again, and the methods ``__init__`` calls on ``self``.

:func:`repeated` maps each repeated function node to the line of the loop call that starts
its chain, computed once per file.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, NamedTuple

from torchmem.lint.children import all_statements, body_fields
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import last_name

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["repeated", "built_repeatedly", "loop_names", "breaks", "time_loop"]

_SCRATCH = "repeats"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def loop_names(loop: ast.AST) -> frozenset[str]:
    """The names a loop binds on each pass (its ``for`` target; none for ``while``)."""
    target = getattr(loop, "target", None)
    return frozenset(n.id for n in ast.walk(target) if type(n) is ast.Name) \
        if target is not None else frozenset()


def breaks(loop: ast.AST) -> bool:
    """Whether ``loop`` has a ``break`` of its own (not of a nested loop)."""
    stack = list(loop.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if type(node) is ast.Break:
            return True
        if type(node) in _LOOPS or type(node) in _FUNCS or type(node) is ast.ClassDef:
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


class _File:
    """The file's functions and classes, by name."""

    def __init__(self, tree: ast.Module) -> None:
        self.functions: dict[str, ast.AST] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.methods: dict[tuple[str, str], ast.AST] = {}
        self.owner: dict[int, str] = {}  # id(method) -> class name
        #: name -> class of the file it is bound to somewhere (``net = ONN(...)``)
        self.instances: dict[str, str] = {}
        for node in tree.body:
            if type(node) in _FUNCS:
                self.functions[node.name] = node  # type: ignore[attr-defined]
            elif type(node) is ast.ClassDef:
                self.classes[node.name] = node
                for item in node.body:
                    if type(item) in _FUNCS:
                        self.methods[(node.name, item.name)] = item  # type: ignore[attr-defined]
                        self.owner[id(item)] = node.name
        for node in all_statements(tree):
            if type(node) is ast.Assign and len(node.targets) == 1 and \
                    type(node.targets[0]) is ast.Name and type(node.value) is ast.Call and \
                    type(node.value.func) is ast.Name and node.value.func.id in self.classes:
                self.instances[node.targets[0].id] = node.value.func.id

    def method(self, cls: str, name: str, seen: frozenset[str] = frozenset()) -> ast.AST | None:
        """``cls.name``, looked up through the base classes of the file."""
        found = self.methods.get((cls, name))
        if found is not None or cls in seen:
            return found
        node = self.classes.get(cls)
        for base in node.bases if node is not None else ():
            key = key_of(base)
            if key is not None and key in self.classes:
                found = self.method(key, name, seen | {cls})
                if found is not None:
                    return found
        return None

    def local(self, call: ast.Call) -> bool:
        """Whether ``call`` may run code of the file (cheap test before :meth:`callees`)."""
        func = call.func
        if type(func) is ast.Name:
            return func.id in self.functions or func.id in self.classes
        return type(func) is ast.Attribute and (
            type(func.value) is ast.Name and (func.value.id == "self" or
                                              func.value.id in self.instances) or
            type(func.value) is ast.Call)

    def callees(self, call: ast.Call, cls: str | None) -> list[ast.AST]:
        """The functions of the file that ``call`` runs: a function, a class's ``__init__``,
        a method called on ``self`` inside class ``cls`` or on a name the file binds to an
        instance of one of its classes, or a base class's method called
        through ``super()``."""
        func = call.func
        if type(func) is ast.Name:
            if func.id in self.functions:
                return [self.functions[func.id]]
            if func.id in self.classes:
                init = self.method(func.id, "__init__")
                return [init] if init is not None else []
        elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                func.value.id == "self" and cls is not None:
            found = self.method(cls, func.attr)
            return [found] if found is not None else []
        elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                func.value.id in self.instances:  # net.partial_fit(x) with net = ONN(...)
            found = self.method(self.instances[func.value.id], func.attr)
            return [found] if found is not None else []
        elif type(func) is ast.Attribute and type(func.value) is ast.Call and \
                type(func.value.func) is ast.Name and func.value.func.id == "super" and \
                cls is not None and cls in self.classes:
            for base in self.classes[cls].bases:  # super().__init__(...): a base's method
                key = key_of(base)
                found = self.method(key, func.attr, frozenset({cls})) if key else None
                if found is not None:
                    return [found]
        return []


#: iterables that go on over time (steps, batches, samples), not over a few parts or settings
_TIME_NAMES = re.compile(r"(loader|batches|_dl|^dl|images|frames|samples|episodes|epochs|"
                         r"steps|iterations|trials|data|dataset|stream)$", re.IGNORECASE)
_COUNTERS = frozenset({"range", "trange", "count"})
_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "list", "zip", "islice", "reversed"})


def time_loop(loop: ast.AST) -> bool:
    """Whether ``loop`` goes on over time: a ``while`` loop, or a ``for`` over a counter
    (``range(n)``, ``itertools.count()``) or over data (a loader, ``images``, ``frames``),
    through ``enumerate``/``tqdm``/``zip``; not over a named list of parts or settings."""
    if type(loop) is ast.While:
        return True
    node = getattr(loop, "iter", None)
    while type(node) is ast.Call and node.args and last_name(key_of(node.func) or "") in _WRAPPERS:
        node = node.args[0]
    if type(node) is ast.Call:
        return last_name(key_of(node.func) or "") in _COUNTERS
    key = key_of(node) if node is not None else None
    return bool(key and _TIME_NAMES.search(last_name(key)))


class _Call(NamedTuple):
    """A call inside a loop."""

    node: ast.Call
    bound: frozenset[str]  # the names its loops bind
    timed: bool  # one of its loops goes on over time (:func:`time_loop`)

    @property
    def same(self) -> bool:
        """Whether its arguments leave the loops' variables alone."""
        call = self.node
        return not any(type(n) is ast.Name and n.id in self.bound
                       for a in [*call.args, *(k.value for k in call.keywords)]
                       for n in ast.walk(a))


def _loop_calls(scope: ast.AST, file: _File) -> list[_Call]:
    """Calls inside loops of ``scope`` (not of nested functions) that reach code of the
    file: a function or class of the file by name, or a method through ``self`` or
    ``super()``."""
    out: list[_Call] = []
    stack: list[tuple[ast.AST, frozenset[str] | None, bool]] = [
        (child, None, False) for child in getattr(scope, "body", ())]
    while stack:
        node, bound, timed = stack.pop()
        kind = type(node)
        if kind in _FUNCS or kind is ast.ClassDef or kind is ast.Lambda:
            continue
        if kind in _LOOPS:
            if breaks(node):
                continue  # runs until a first match: not once per pass
            inner = (bound or frozenset()) | loop_names(node)
            t = timed or time_loop(node)
            stack.extend((child, inner, t) for child in node.body + node.orelse)  # type: ignore[attr-defined]
            test = getattr(node, "test", None)
            if test is not None:
                stack.append((test, inner, t))
            stack.extend((child, bound, timed) for child in (getattr(node, "iter", None),)
                         if child)
            continue
        if bound is not None and kind is ast.If and any(
                type(n) is ast.Name and n.id in bound for n in ast.walk(node.test)):  # type: ignore[attr-defined]
            continue  # if rank == r: ... runs for one pass of the loop
        if bound is not None and kind is ast.Call and file.local(node):  # type: ignore[arg-type]
            out.append(_Call(node, bound, timed))  # type: ignore[arg-type]
        if bound is None:  # outside loops only statements matter: they may hold a loop
            if isinstance(node, (ast.stmt, ast.excepthandler, ast.match_case)):
                stack.extend((child, None, False) for name in body_fields(kind)
                             for child in getattr(node, name))
        else:
            stack.extend((child, bound, timed) for child in ast.iter_child_nodes(node))
    return out


def repeated(ctx: Context, same_inputs: bool = False, over_time: bool = False) -> dict[int, int]:
    """``id(function node) -> line`` of the loop call that makes it run again and again;
    with ``same_inputs``, only through loop calls whose arguments do not depend on the
    loop's variables (a new helper for the same model on every pass); with
    ``over_time``, only through loops over steps or data (:func:`time_loop`)."""
    return _memo(ctx).functions("time" if over_time else "same" if same_inputs else "every")


def built_repeatedly(ctx: Context) -> dict[str, int]:
    """``class name -> line`` of the loop call that starts the chain, for each class of the
    file constructed again and again over time (in a loop over steps or data, with the
    same inputs on every pass, directly or in a function such a loop calls; not in a
    constructor's loop), and for the base classes of the file of each such class."""
    return _memo(ctx).classes()


def _memo(ctx: Context) -> _Repeats:
    memo = ctx.scratch.get(_SCRATCH)
    if memo is None:
        memo = ctx.scratch[_SCRATCH] = _Repeats(ctx.tree)
    return memo  # type: ignore[no-any-return]


class _Repeats:
    """The loop calls of one file and the repeated functions and classes they give, each
    computed when first asked."""

    def __init__(self, tree: ast.Module | None) -> None:
        self.tree = tree
        self.file = _File(tree) if tree is not None else None
        self._calls: list[tuple[_Call, ast.AST, str | None]] | None = None
        self._found: dict[str, dict[int, int]] = {}
        self._classes: dict[str, int] | None = None

    def calls(self) -> list[tuple[_Call, ast.AST, str | None]]:
        if self._calls is None:
            file = self.file
            self._calls = []
            if file is not None:
                scopes: list[tuple[ast.AST, str | None]] = [(self.tree, None)]  # type: ignore[list-item]
                scopes += [(f, None) for f in file.functions.values()]
                scopes += [(m, file.owner[id(m)]) for m in file.methods.values()]
                self._calls = [(c, scope, cls) for scope, cls in scopes
                               for c in _loop_calls(scope, file)]
        return self._calls

    def _seeds(self, which: str) -> list[tuple[ast.Call, str | None]]:
        calls = self.calls()
        if which == "every":
            return [(c.node, cls) for c, _, cls in calls]
        if which == "same":
            return [(c.node, cls) for c, _, cls in calls if c.same]
        if which == "time":
            return [(c.node, cls) for c, _, cls in calls if c.timed]
        # classes built over time: same inputs, a loop over time, not a constructor's loop
        return [(c.node, cls) for c, scope, cls in calls if c.timed and
                getattr(scope, "name", "") != "__init__" and c.same]

    def functions(self, which: str) -> dict[int, int]:
        found = self._found.get(which)
        if found is None:
            found = self._found[which] = _propagate(self.file, self._seeds(which)) \
                if self.file is not None else {}
        return found

    def classes(self) -> dict[str, int]:
        if self._classes is None:
            self._classes = _built(self.file, self._seeds("built"), self.functions("built")) \
                if self.file is not None else {}
        return self._classes


def _built(file: _File, seeds: list[tuple[ast.Call, str | None]],
           found: dict[int, int]) -> dict[str, int]:
    """The classes constructed by the ``seeds`` calls or in a function of ``found``, with
    their base classes of the file."""
    out: dict[str, int] = {}
    todo = [(call.func.id, call.lineno) for call, _ in seeds if type(call.func) is ast.Name]
    fns = {id(f): f for f in [*file.functions.values(), *file.methods.values()]}
    for fn_id, line in found.items():
        fn = fns.get(fn_id)
        todo.extend((c.func.id, line) for c in (ast.walk(fn) if fn is not None else ())
                    if type(c) is ast.Call and type(c.func) is ast.Name)  # type: ignore[attr-defined]
    while todo:
        cls, line = todo.pop()
        if cls in out or cls not in file.classes:
            continue
        out[cls] = line
        todo.extend((key, line) for key in (key_of(b) for b in file.classes[cls].bases) if key)
    return out


def _propagate(file: _File, seeds: list[tuple[ast.Call, str | None]]) -> dict[int, int]:
    """The functions the ``seeds`` calls run, and those they call in turn."""
    found: dict[int, int] = {}
    work = [(callee, call.lineno) for call, cls in seeds for callee in file.callees(call, cls)]
    while work:
        fn, line = work.pop()
        if id(fn) in found:
            continue
        found[id(fn)] = line
        cls = file.owner.get(id(fn))
        for call in ast.walk(fn):
            if type(call) is ast.Call:
                work.extend((callee, line) for callee in file.callees(call, cls))
    return found
