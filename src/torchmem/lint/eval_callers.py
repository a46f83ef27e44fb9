"""The eval mode of a function's callers: functions of a file that only ever run as
evaluation code (no torch).

``_validate()`` calls ``self.model.eval()`` and then ``self._run_batches(loader)``, a
method with a neutral name whose loop runs forward passes. Judged on its own,
``_run_batches`` is neither named like evaluation nor calls ``.eval()``; its callers say it
is evaluation code. :func:`eval_functions` finds the functions and methods of one file
whose every call in that file is an evaluation call, so that the rules judge them as
evaluation code (like :func:`torchmem.lint.callers.no_grad_functions` does for ``no_grad``).

An evaluation call is made, outside ``no_grad``, by a caller that never trains (no
``backward()``, no optimizer ``step()``, no call of a function of the file that does), and
either after ``model.eval()`` (or ``.train(False)``) in that caller, in the same block or
an enclosing one, with no ``.train()`` in between, or from a function that is itself
evaluation code by this definition (a fixed point over the calls of the file). Calls made
under ``no_grad`` are neutral; at least one evaluation call is needed.

Not evaluation calls: a call whose result the caller returns (``return self._run(x)``, or
``out = self._run(x); ...; return out``: the caller's own caller may differentiate it);
calls from nested functions and lambdas (run at an unknown time); calls after a
``.train()`` that may have run (in a branch, or later in the same loop body). A function
whose name is also used as a value (a callback) keeps its own judgement: its callers are
unknown. Calls resolved: ``name(...)`` to a top-level function, ``self.name(...)`` to every
method of that name in the classes of the file. Calls from other files are not seen.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from torchmem.lint.callers import file_functions
from torchmem.lint.children import FIELDS, child_nodes, fields, walk
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import NO_GRAD_CONTEXTS, is_no_grad_decorator

__all__ = ["eval_functions", "mentions_eval"]

_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
_Key = tuple[str | None, str]
#: the module's top level as a caller (never itself a callee)
_MODULE: _Key = (None, "<module>")
#: calls from nested functions and lambdas: run at a time nobody can tell
_UNKNOWN: _Key = (None, "<unknown>")
#: the body of a top-level class (its methods are callees; its own code runs at import)
_CLASS: _Key = (None, "<class>")
_SET_GRAD = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})


def mentions_eval(source: str | bytes) -> bool:
    """Whether a file's text can put a model in eval mode at all (the analysis below is
    skipped for the many files that cannot)."""
    if isinstance(source, bytes):
        return b".eval()" in source or b".train(False)" in source
    return ".eval()" in source or ".train(False)" in source


def _mode(node: ast.AST) -> str | None:
    """``"eval"`` for ``x.eval()`` / ``x.train(False)``, ``"train"`` for any other
    ``x.train(...)``, else ``None``."""
    if type(node) is not ast.Call or type(node.func) is not ast.Attribute:  # type: ignore[attr-defined]
        return None
    attr = node.func.attr  # type: ignore[attr-defined]
    args = node.args  # type: ignore[attr-defined]
    if attr == "eval" and not args and not node.keywords:  # type: ignore[attr-defined]
        return "eval"
    if attr == "train":
        off = len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value is False
        return "eval" if off and not node.keywords else "train"  # type: ignore[attr-defined]
    return None


class _Site:
    __slots__ = ("caller", "evaluated", "no_grad", "returned", "targets")

    def __init__(self, caller: _Key, evaluated: bool, no_grad: bool, returned: bool,
                 targets: list[ast.expr]) -> None:
        self.caller = caller
        self.evaluated = evaluated  # after .eval() in the caller, outside no_grad
        self.no_grad = no_grad
        self.returned = returned  # the call is part of a returned or yielded value
        self.targets = targets  # what its statement assigns (read only when needed)


class _Scan:
    """One ordered walk of the file's statements."""

    def __init__(self, defs: dict[_Key, list[ast.AST]],
                 qualname: Callable[[ast.AST], str | None]) -> None:
        self.defs = defs
        self.qualname = qualname
        self.sites: dict[_Key, list[_Site]] = {}
        self.callees: dict[_Key, set[_Key]] = {}
        self.trains: set[_Key] = set()
        self.escaped: set[_Key] = set()
        self.returns: dict[_Key, list[ast.expr]] = {}  # returned values, by caller
        # the state of the function being walked
        self.caller: _Key = _MODULE
        self.owner: _Key = _MODULE  # the function of the file a nested function is part of
        self.cls: str | None = None
        self.eval_on = False
        self.no_grad = False

    def function(self, node: ast.AST, key: _Key, cls: str | None) -> None:
        saved = (self.caller, self.owner, self.cls, self.eval_on, self.no_grad)
        if key is not _UNKNOWN:
            self.owner = key
        decorated = any(is_no_grad_decorator(self.qualname(d.func if type(d) is ast.Call else d)
                                             or key_of(d.func if type(d) is ast.Call else d))
                        for d in node.decorator_list)  # type: ignore[attr-defined]
        self.caller, self.cls, self.eval_on, self.no_grad = key, cls, False, decorated
        for d in node.decorator_list:  # type: ignore[attr-defined]
            self.exprs([d], False, [])
        self.block(node.body)  # type: ignore[attr-defined]
        self.caller, self.owner, self.cls, self.eval_on, self.no_grad = saved

    def block(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            t = type(stmt)
            if t in _FUNC_TYPES:
                if self.caller is _MODULE and self.cls is None:
                    key: _Key = (None, stmt.name)  # type: ignore[attr-defined]
                elif self.caller is _CLASS:
                    key = ("self", stmt.name)  # type: ignore[attr-defined]
                else:  # a nested function: its calls run at an unknown time
                    key = _UNKNOWN
                self.function(stmt, key, self.cls)
                continue
            if t is ast.ClassDef:
                saved = (self.caller, self.cls)
                # class-level code runs once, at import: its calls count as unknown
                self.caller = _CLASS if saved == (_MODULE, None) else _UNKNOWN
                self.cls = stmt.name  # type: ignore[attr-defined]
                self.exprs(stmt.bases + stmt.decorator_list, False, [])  # type: ignore[attr-defined]
                self.block(stmt.body)  # type: ignore[attr-defined]
                self.caller, self.cls = saved
                continue
            if (t is ast.Expr or t is ast.Assign) and _mode(stmt.value) == "eval":  # type: ignore[attr-defined]
                self.exprs(child_nodes(stmt), False, [])  # model = build().eval()
                self.eval_on = True
                continue
            value = stmt.value if t is ast.Expr else None  # type: ignore[attr-defined]
            if type(value) is ast.Call and self.qualname(value.func) in _SET_GRAD:
                arg = value.args[0] if value.args else None
                self.no_grad = not (isinstance(arg, ast.Constant) and arg.value is True)
                continue
            self.statement(stmt, t)

    def statement(self, stmt: ast.stmt, t: type) -> None:
        returned = t is ast.Return or t is ast.Expr and type(stmt.value) in (  # type: ignore[attr-defined]
            ast.Yield, ast.YieldFrom)
        targets: list[ast.expr] = []
        if t is ast.Assign or t is ast.AnnAssign or t is ast.AugAssign:
            targets = stmt.targets if t is ast.Assign else [stmt.target]  # type: ignore[attr-defined]
        if returned and stmt.value is not None:  # type: ignore[attr-defined]
            self.returns.setdefault(self.caller, []).append(stmt.value)  # type: ignore[attr-defined]
        exprs: list[ast.AST] = []
        blocks: list[list[ast.stmt]] = []
        no_grad = self.no_grad
        for child in child_nodes(stmt):
            if isinstance(child, ast.stmt):
                continue  # the bodies, in order below
            if isinstance(child, (ast.excepthandler, ast.match_case)):
                exprs.extend(c for c in child_nodes(child) if not isinstance(c, ast.stmt))
            elif type(child) is ast.withitem:
                if self.qualname(child.context_expr.func if type(child.context_expr) is  # type: ignore[attr-defined]
                                 ast.Call else child.context_expr) in NO_GRAD_CONTEXTS:  # type: ignore[attr-defined]
                    no_grad = True
                exprs.append(child)
            else:
                exprs.append(child)
        for name in ("body", "orelse", "finalbody"):
            value = getattr(stmt, name, None)
            if value.__class__ is list and value:
                blocks.append(value)
        for holder in getattr(stmt, "handlers", None) or getattr(stmt, "cases", None) or ():
            blocks.append(holder.body)
        self.exprs(exprs, returned, targets)
        if not blocks:
            return
        before = self.eval_on
        if before and t in (ast.For, ast.AsyncFor, ast.While) and any(
                _mode(n) == "train" for n in walk(stmt)):
            before = False  # a later .train() in the body runs before the next iteration
        after = before
        saved_no_grad = self.no_grad
        for body in blocks:
            self.eval_on = before
            self.no_grad = no_grad if body is getattr(stmt, "body", None) else saved_no_grad
            self.block(body)
            after = after and self.eval_on
        self.eval_on, self.no_grad = after, saved_no_grad

    def exprs(self, nodes: list[ast.AST], returned: bool, targets: list[ast.expr]) -> None:
        todo = [(n, False) for n in nodes]
        push = todo.append
        defs, escaped = self.defs, self.escaped
        train = False
        while todo:
            node, deferred = todo.pop()
            t = type(node)
            if t is ast.Lambda:
                todo.extend((c, True) for c in child_nodes(node))
                continue
            if t is ast.Name:
                if (None, node.id) in self.defs:  # type: ignore[attr-defined]
                    self.escaped.add((None, node.id))  # type: ignore[attr-defined]
                continue
            if t is ast.Call:
                func = node.func  # type: ignore[attr-defined]
                if type(func) is ast.Attribute and func.attr in ("backward", "step"):
                    self.trains.add(self.caller)
                    self.trains.add(self.owner)  # a closure's backward trains its owner
                mode = _mode(node)
                if mode == "train":
                    train = True
                key = self._callee(func)
                if key is not None:
                    caller = _UNKNOWN if deferred else self.caller
                    self.callees.setdefault(caller, set()).add(key)
                    self.sites.setdefault(key, []).append(_Site(
                        caller, self.eval_on and not self.no_grad, self.no_grad, returned,
                        targets))
                    todo.extend((c, deferred) for c in node.args)  # type: ignore[attr-defined]
                    todo.extend((kw.value, deferred) for kw in node.keywords)  # type: ignore[attr-defined]
                    if type(func) is ast.Attribute:
                        todo.append((func.value, deferred))
                    continue
            elif t is ast.Attribute:
                key = self._callee(node)  # type: ignore[arg-type]
                if key is not None:
                    self.escaped.add(key)  # used as a value: called from places we cannot see
            for field in FIELDS.get(t) or fields(t):  # child_nodes(node), inline: the
                value = getattr(node, field)  # names and constants handled as met
                for child in value if value.__class__ is list else (value,):
                    c = child.__class__
                    if c is ast.Name:
                        if (None, child.id) in defs:
                            escaped.add((None, child.id))
                    elif c is not ast.Constant and child is not None:
                        push((child, deferred))
        if train:
            self.eval_on = False

    def _callee(self, func: ast.AST) -> _Key | None:
        if type(func) is ast.Name:
            key: _Key = (None, func.id)  # type: ignore[attr-defined]
        elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                func.value.id == "self" and self.cls is not None:  # type: ignore[attr-defined]
            key = ("self", func.attr)  # type: ignore[attr-defined]
        else:
            return None
        return key if key in self.defs else None


def eval_functions(tree: ast.Module, qualname: Callable[[ast.AST], str | None]
                   ) -> frozenset[int]:
    """``id()`` of every function/method node of ``tree`` whose calls in the file are all
    evaluation calls (call it only when :func:`mentions_eval`)."""
    defs = file_functions(tree)
    if not defs:
        return frozenset()
    scan = _Scan(defs, qualname)
    scan.block(tree.body)

    trains = set(scan.trains)  # a caller of a function that trains trains too
    changed = True
    while changed:
        changed = False
        for caller, callees in scan.callees.items():
            if caller not in trains and callees & trains:
                trains.add(caller)
                changed = True

    returned_names: dict[_Key, set[str]] = {}

    def returns_target(site: _Site) -> bool:
        """Whether the caller returns a name the call's statement assigns."""
        if not site.targets or site.caller not in scan.returns:
            return False
        names = returned_names.get(site.caller)
        if names is None:
            names = returned_names[site.caller] = {
                n.id for value in scan.returns[site.caller] for n in walk(value)
                if type(n) is ast.Name}
        return any(type(n) is ast.Name and n.id in names
                   for tg in site.targets for n in walk(tg))

    def evaluation(site: _Site, found: set[_Key]) -> bool | None:
        """True for an evaluation call, None for a neutral one (under no_grad)."""
        if site.no_grad:
            return None
        caller = site.caller
        if caller is _UNKNOWN or caller is _CLASS or caller in trains or site.returned or \
                not (site.evaluated or caller in found):
            return False
        return not returns_target(site)

    found: set[_Key] = set()
    changed = True
    while changed:
        changed = False
        for key, sites in scan.sites.items():
            if key in found or key in scan.escaped or key in trains:
                continue
            some = False
            for site in sites:
                verdict = evaluation(site, found)
                if verdict is False:
                    break
                some = some or bool(verdict)
            else:
                if some:
                    found.add(key)
                    changed = True
    return frozenset(id(d) for k in found for d in defs[k])
