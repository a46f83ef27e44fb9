"""The one statement-level pass that gathers a function's facts (no torch).

:func:`gather` walks a function body once (nested functions and methods are their own
scopes; the other statements of a class body run where the class is defined, and are
walked there) and fills a :class:`~torchmem.lint.facts.FunctionFacts` and the
:class:`~torchmem.lint.facts.LoopFacts` of every loop in it; see :mod:`torchmem.lint.facts`
for what they hold and their known limitations.
"""

from __future__ import annotations

import ast
from typing import Callable

from torchmem.lint.children import walk
from torchmem.lint.facts import FunctionFacts, LoopFacts, key_of, mode_flag, target_keys
from torchmem.lint.knowledge import BACKWARD_CALLERS, OPTIMIZER_NAME, last_name

__all__ = ["gather"]

#: statements of newer Pythons (``except*`` 3.11, ``match`` 3.10), compared by identity
_TRY_STAR = getattr(ast, "TryStar", None)
_MATCH = getattr(ast, "Match", None)


def _backward_roots(call: ast.Call, qualname: Callable[[ast.AST], str | None]
                    ) -> list[ast.expr] | None:
    """The expressions a backward-like call differentiates, or ``None`` if not one."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            recv = key_of(func.value)
            if call.args and recv is not None and last_name(recv) in BACKWARD_CALLERS:
                return [call.args[0]]
            if qualname(func) == "torch.autograd.backward":
                return list(call.args[:1])
            if qualname(func.value) is not None:  # dist_autograd.backward(ctx_id, [loss])
                return list(call.args)
            return [func.value]
        if func.attr == "manual_backward":
            return list(call.args[:1])
    return None


def _own_grad_update(target: ast.AST, value: ast.AST) -> bool:
    """``p -= lr * p.grad`` (or ``p.data -= ...``): a parameter updated from its own grad."""
    if type(target) is ast.Attribute and target.attr == "data":
        target = target.value
    key = key_of(target)
    if key is None:
        return False
    for sub in walk(value):
        if type(sub) is ast.Attribute and sub.attr == "grad" and key_of(sub.value) == key:
            return True
    return False


_ACCUMULATE = frozenset({"append", "extend", "insert", "add", "appendleft", "update"})
#: the methods :func:`gather` reads the receiver of (any other method call is looked at only
#: as ``torch.autograd.grad``)
_RECEIVER_ATTRS = _ACCUMULATE | {"step", "zero_grad", "zero_", "detach_", "eval", "train",
                                 "requires_grad_"}


def gather(body: list[ast.stmt], qualname: Callable[[ast.AST], str | None]) -> FunctionFacts:
    """Walk a function body once (statements only) and return its :class:`FunctionFacts`."""
    facts = FunctionFacts()
    facts.body = body
    loops: list[LoopFacts] = []
    ifs = [0]  # the ``if`` statements around the current statement

    def bind(key: str, value: ast.expr | None, plain: bool = True,
             loop_value: ast.expr | None = None) -> None:
        facts.assigned.add(key)
        if value is not None:
            facts.defs.setdefault(key, []).append(value)
        for loop in loops:
            loop.assigned.add(key)
            if plain:
                if ifs[0] > loop.ifs:
                    loop.cond_assigns.add(len(loop.assigns))
                loop.assigns.append((key, loop_value))

    def call(node: ast.Call) -> None:
        roots = _backward_roots(node, qualname)
        func = node.func
        if roots is not None:
            facts.backward_roots.extend(roots)
            facts.backward_calls.append(node)
            for loop in loops:
                loop.backward.append(node)
            if loops:
                loops[-1].own_step = True
            return
        if not isinstance(func, ast.Attribute):
            if isinstance(func, ast.Name) and qualname(func) == "torch.autograd.grad":
                _grad(node)
            return
        attr = func.attr
        if attr not in _RECEIVER_ATTRS:  # most calls: no receiver key built
            if attr == "grad" and qualname(func) == "torch.autograd.grad":
                _grad(node)
            return
        recv = key_of(func.value)
        if attr == "step":
            name = last_name(recv) if recv else ""
            if OPTIMIZER_NAME.match(name) or (name == "scaler" and node.args):
                facts.has_step = True
                for loop in loops:
                    loop.step = True
                    loop.step_calls.append(node)
                if loops:
                    loops[-1].own_step = True
        elif attr == "zero_grad" or (attr in ("zero_", "detach_") and recv
                                     and recv.endswith(".grad")):
            facts.has_zero_grad = True
            for loop in loops:
                loop.zero_grad = True
        elif attr == "eval" and not node.args and recv:
            facts.eval_receivers.add(recv)
        elif attr == "train" and recv and mode_flag(node) is not None:
            facts.mode_flags.add(mode_flag(node))  # type: ignore[arg-type]
        elif attr in _ACCUMULATE and recv and node.args:
            facts.defs.setdefault(recv, []).extend(node.args)
            for arg in node.args:
                if type(arg) is ast.Name:
                    facts.escapes.add(arg.id)
        elif attr == "requires_grad_" and recv and node.args and isinstance(
                node.args[0], ast.Constant) and node.args[0].value is False:
            facts.grad_disabled_keys.add(recv)
        elif qualname(func) == "torch.autograd.grad":
            _grad(node)

    def _grad(node: ast.Call) -> None:
        facts.grad_calls.append(node)
        for loop in loops:
            loop.grad_calls.append(node)
        outputs = node.args[:1] or [kw.value for kw in node.keywords if kw.arg == "outputs"]
        facts.backward_roots.extend(outputs)

    def stmts(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            stmt(node)

    def stmt(node: ast.stmt) -> None:
        t = type(node)
        if t is ast.Expr:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is ast.Call:
                call(value)
            elif type(value) in (ast.Yield, ast.YieldFrom) and type(value.value) is ast.Name:
                facts.escapes.add(value.value.id)
            elif type(value) is ast.Await and type(value.value) is ast.Call:
                call(value.value)
        elif t is ast.Assign:
            value = node.value  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                if isinstance(target, ast.Attribute) and target.attr == "grad" and isinstance(
                        value, ast.Constant) and value.value is None:
                    facts.has_zero_grad = True
                    for loop in loops:
                        loop.zero_grad = True
                if isinstance(target, ast.Attribute) and target.attr == "requires_grad" and (
                        isinstance(value, ast.Constant) and value.value is False):
                    k = key_of(target.value)
                    if k:
                        facts.grad_disabled_keys.add(k)
                for key in target_keys(target):
                    bind(key, value, True, value)
                    facts.rebound.add(key)
                if type(value) is ast.Name and type(target) in (ast.Subscript, ast.Attribute):
                    facts.escapes.add(value.id)
            while type(value) is ast.Subscript:
                value = value.value
            if type(value) is ast.Call:
                call(value)
        elif t is ast.AugAssign or t is ast.AnnAssign:
            value = node.value  # type: ignore[attr-defined]
            if t is ast.AugAssign and value is not None and _own_grad_update(
                    node.target, value):  # type: ignore[attr-defined]
                facts.has_step = True  # p -= lr * p.grad: a hand-written optimizer step
                for loop in loops:
                    loop.step = True
                if loops:
                    loops[-1].own_step = True
            for key in target_keys(node.target):  # type: ignore[attr-defined]
                bind(key, value, t is ast.AnnAssign and value is not None, value)
                if t is ast.AnnAssign:
                    facts.rebound.add(key)
        elif t is ast.For or t is ast.AsyncFor or t is ast.While:
            loop = LoopFacts(node, loops[-1] if loops else None)
            loop.ifs = ifs[0]
            facts.loops[id(node)] = loop
            loops.append(loop)
            if t is not ast.While:
                for key in target_keys(node.target):  # type: ignore[attr-defined]
                    bind(key, node.iter)  # type: ignore[attr-defined]
                    facts.rebound.add(key)
            stmts(node.body)  # type: ignore[attr-defined]
            loops.pop()
            stmts(node.orelse)  # type: ignore[attr-defined]
        elif t is ast.If:
            ifs[0] += 1
            stmts(node.body)  # type: ignore[attr-defined]
            stmts(node.orelse)  # type: ignore[attr-defined]
            ifs[0] -= 1
        elif t is ast.With or t is ast.AsyncWith:
            for item in node.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    for key in target_keys(item.optional_vars):
                        bind(key, item.context_expr)
                        facts.rebound.add(key)
            stmts(node.body)  # type: ignore[attr-defined]
        elif t is ast.Try or t is _TRY_STAR:
            stmts(node.body)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                stmts(handler.body)
            stmts(node.orelse)  # type: ignore[attr-defined]
            stmts(node.finalbody)  # type: ignore[attr-defined]
        elif t is ast.Return:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is ast.Name:
                facts.escapes.add(value.id)
            elif type(value) is ast.Tuple:
                facts.escapes.update(e.id for e in value.elts if type(e) is ast.Name)
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            bind(node.name, None)  # type: ignore[attr-defined]
        elif t is ast.ClassDef:
            bind(node.name, None)  # type: ignore[attr-defined]
            # the class body runs here, once, and the walker walks it in this scope (its
            # methods are their own scopes): its loops and bindings are facts of this one
            stmts([s for s in node.body  # type: ignore[attr-defined]
                   if type(s) is not ast.FunctionDef and type(s) is not ast.AsyncFunctionDef])
        elif t is _MATCH:
            for case in node.cases:  # type: ignore[attr-defined]
                stmts(case.body)
        elif t is ast.Delete:
            for target in node.targets:  # type: ignore[attr-defined]
                for key in target_keys(target):
                    bind(key, None)

    try:
        stmts(body)
    finally:
        # the nested functions call each other through cells: clear them, so the facts
        # are freed by reference counting rather than by the cyclic collector
        del stmts, stmt, call, bind, _grad, ifs
    return facts


def calls_autograd_grad(node: ast.AST) -> bool:
    """Whether ``node`` calls ``torch.autograd.grad`` / ``autograd.grad`` (as written:
    the summaries read no imports here)."""
    for sub in ast.walk(node):
        if type(sub) is ast.Call:
            func = sub.func
            if type(func) is ast.Attribute and func.attr == "grad" and (
                    (type(func.value) is ast.Attribute and func.value.attr == "autograd")
                    or (type(func.value) is ast.Name and func.value.id == "autograd")):
                return True
    return False
