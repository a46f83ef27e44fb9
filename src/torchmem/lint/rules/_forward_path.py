"""The methods of an ``nn.Module`` class that run on every forward pass (no torch).

``forward()`` itself and the methods of the same class that it calls through ``self``,
transitively (``self.get_attention(q, k, v)`` calling ``self.einsum_op(q, k, v)``). Code
there runs once per forward pass: in every step of whatever loop drives the model, in
files the linter never sees. :func:`beside_forward` tells whether a statement sits in
the same block of a loop as a forward pass (so runs with every one of them).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["beside_forward", "on_forward_path", "unconditional_in_forward"]

_SCRATCH = "forward_path"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NESTED = (*_FUNCS, ast.Lambda, ast.ClassDef, ast.For, ast.AsyncFor, ast.While)


def _self_calls(fn: ast.AST) -> set[str]:
    """Names of the methods ``fn`` calls as ``self.name(...)`` (nested functions aside)."""
    out: set[str] = set()
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if type(node) is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            if type(func) is ast.Attribute and type(func.value) is ast.Name and \
                    func.value.id == "self":
                out.add(func.attr)
        if not isinstance(node, (*_FUNCS, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _reachable(cls: ast.ClassDef) -> frozenset[str]:
    methods = {s.name: s for s in cls.body if isinstance(s, _FUNCS)}
    if "forward" not in methods:
        return frozenset()
    seen = {"forward"}
    todo = ["forward"]
    while todo:
        for name in _self_calls(methods[todo.pop()]):
            if name in methods and name not in seen:
                seen.add(name)
                todo.append(name)
    return frozenset(seen)


def _guards(call: ast.Call, fn: ast.AST) -> list[ast.expr] | None:
    """The tests of the ``if`` statements of ``fn`` around ``call`` (``None`` if not found)."""

    def find(node: ast.AST, tests: list[ast.expr]) -> list[ast.expr] | None:
        if node is call:
            return tests
        if node is not fn and isinstance(node, (*_FUNCS, ast.Lambda, ast.ClassDef)):
            return None
        if isinstance(node, ast.If):
            found = find(node.test, tests)
            inner = [*tests, node.test]
            for stmt in node.body + node.orelse:
                if found is None:
                    found = find(stmt, inner)
            return found
        for child in ast.iter_child_nodes(node):
            found = find(child, tests)
            if found is not None:
                return found
        return None

    try:
        return find(fn, [])
    finally:
        del find  # it calls itself through a cell: no cycle left behind


def _device_check(test: ast.expr) -> bool:
    """``q.device.type == "cuda"``, ``x.is_cuda``, ``torch.cuda.is_available()``: a guard
    that picks the device's code path and stays true on every call."""
    for sub in ast.walk(test):
        if type(sub) is ast.Attribute and sub.attr in ("device", "is_cuda", "is_available"):
            return True
    return False


def unconditional_in_forward(call: ast.Call, ctx: Context) -> bool:
    """Whether ``call`` runs on every call of the current function: outside any ``if``, or
    only under device checks (not under an option such as ``if cfg.empty_cache:``)."""
    guards = _guards(call, ctx.fn.node)
    return guards is not None and all(_device_check(t) for t in guards)


def on_forward_path(ctx: Context) -> bool:
    """Whether the current function is ``forward()`` of an ``nn.Module`` class of this file,
    or a method of that class that ``forward()`` calls (directly or not)."""
    fn = ctx.fn
    summaries = ctx.summaries
    if fn is None or fn.class_name is None or not ctx.in_module_class or summaries is None:
        return False
    cls = summaries.classes.get(fn.class_name)
    if cls is None:
        return False
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    names = memo.get(id(cls))
    if names is None:
        names = memo[id(cls)] = _reachable(cls)
    return fn.name in names and any(s is fn.node for s in cls.body)


def beside_forward(call: ast.Call, ctx: Context) -> bool:
    """Whether the statement list holding ``call`` (in the innermost loop) also runs a
    forward pass, directly or through a function of the same file, and not in a nested
    loop: the flush is not periodic, it comes with every forward pass (a request loop's
    ``if method == "forward":`` branch). A model built anew in each iteration (a loop over
    different workloads) does not count."""
    loop = ctx.loops[-1]
    block = _block_of(call, loop.node)
    if block is None:
        return False
    summaries = ctx.summaries
    todo: list[ast.AST] = list(block)
    while todo:
        sub = todo.pop()
        if isinstance(sub, _NESTED):
            continue
        todo.extend(ast.iter_child_nodes(sub))
        if type(sub) is not ast.Call or sub is call:
            continue
        func = sub.func  # type: ignore[attr-defined]
        receiver = func.value if type(func) is ast.Attribute and func.attr == "forward" \
            else func
        if key_of(receiver) in loop.facts.assigned:
            continue  # a model (or function) bound in this iteration: another workload
        if ctx.flow.is_forward(sub, strict=True):  # type: ignore[arg-type]
            return True
        if summaries is not None and summaries.resolve(func, ctx.flow) is not None:
            summary = summaries.summarize(sub, ctx.flow)  # type: ignore[arg-type]
            if summary is not None and summary.forwards:
                return True
    return False


def _block_of(call: ast.Call, loop: ast.AST) -> list[ast.stmt] | None:
    """The statement list, inside ``loop``, whose statement is ``call`` itself."""
    todo: list[ast.AST] = [loop]
    while todo:
        node = todo.pop()
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for stmt in block:
                if type(stmt) is ast.Expr and stmt.value is call:
                    return block
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    todo.append(stmt)
        todo.extend(getattr(node, "handlers", ()))
    return None
