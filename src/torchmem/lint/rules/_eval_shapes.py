"""Shapes of code that TMM103 reads (no torch): which calls run a forward pass of a module
with weights, which functions return what they compute, which methods and nested functions
run forward passes out of sight.

Split from :mod:`torchmem.lint.rules.evaluation`, which decides where evaluation code is
and reports it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import walk
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import EVAL_FUNCTION, is_model_name, last_name

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["abstract_eval_method", "branch_end", "by_callers_only", "forwarding_closure", "has_weights",
           "inference_method", "returns_value"]

#: method names that run the object's model for inference (scikit-learn-style wrappers)
_INFERENCE_METHODS = frozenset({"infer", "inference", "predict", "predict_proba"})
#: scratch key: function id -> names of its nested functions that run forward passes
_CLOSURES = "TMM103.closures"


def returns_value(fn: ast.AST) -> bool:
    """Whether function ``fn`` returns or yields a value (nested functions aside)."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        t = type(node)
        if isinstance(node, ast.Return) and node.value is not None or t is ast.Yield or \
                t is ast.YieldFrom:
            return True
        if t not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef):
            todo.extend(ast.iter_child_nodes(node))
    return False


def has_weights(call: ast.Call, fn: ast.AST, methods: bool = False) -> bool:
    """Whether the module ``call`` runs is known to have weights: it is named like a model
    (``model``, ``net``, ``encoder``), or the function loads a state dict into it. A
    parameter-free layer under test (``pool(x)``, ``DropPath``) records no graph. With
    ``methods``, the receiver of any forward method counts (``model.decode(x)``)."""
    func = call.func
    if type(func) is ast.Attribute and (func.attr in ("forward", "forward_features") or
                                        methods and not is_model_name(func.attr)):
        func = func.value  # model.decode(x), self.model.predict_step(batch)
    key = key_of(func)
    if key is None:
        return False
    if is_model_name(last_name(key)):
        return True
    for sub in walk(fn):
        if type(sub) is ast.Call and type(sub.func) is ast.Attribute and \
                sub.func.attr == "load_state_dict" and key_of(sub.func.value) == key:
            return True
    return False


def by_callers_only(ctx: Context) -> bool:
    """Whether the current function is evaluation code only because of its callers (not
    named so, no ``model.eval()`` of its own, no loop over an eval loader): then a forward
    pass counts only for a module known to have weights, and kept values only in a loop
    that runs one, and the finding points at the forward pass (``similarity(a, b)`` of a
    parameter-free module records no graph; a helper's output dict may hold plain numbers)."""
    fn = ctx.fn
    return fn.eval_callers and not (fn.eval_named() or fn.facts.eval_receivers or any(
        lp.eval_loader for lp in ctx.loops))


def inference_method(call: ast.Call, ctx: Context) -> bool:
    """``self.infer(x)`` / ``self.predict(x)`` after ``model.eval()``: a method of the
    same object, defined out of sight (a base class of another file), named like
    inference; taken to run a forward pass."""
    func = call.func
    return type(func) is ast.Attribute and type(func.value) is ast.Name and \
        func.value.id == "self" and func.attr in _INFERENCE_METHODS


def abstract_eval_method(call: ast.Call, callee: ast.AST) -> bool:
    """``self.evaluate(...)`` where ``evaluate`` is, in this file, a stub that subclasses
    override out of sight (its body only ``pass``, ``...`` or ``raise`` /
    ``return NotImplementedError``), named like evaluation or inference: taken to run a
    forward pass, like a method defined out of sight."""
    func = call.func
    if not (type(func) is ast.Attribute and type(func.value) is ast.Name and
            func.value.id == "self" and (EVAL_FUNCTION.match(func.attr) or
                                         func.attr in _INFERENCE_METHODS)):
        return False
    body = list(getattr(callee, "body", ()))
    if body and type(body[0]) is ast.Expr and isinstance(body[0].value, ast.Constant) and \
            isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    if len(body) != 1:
        return False
    stmt = body[0]
    if type(stmt) is ast.Pass or type(stmt) is ast.Raise or type(stmt) is ast.Expr and \
            isinstance(stmt.value, ast.Constant) and stmt.value.value is Ellipsis:
        return True
    value = stmt.value if type(stmt) is ast.Return else None
    if type(value) is ast.Call:
        value = value.func
    return type(value) is ast.Name and value.id in ("NotImplementedError", "NotImplemented")


def forwarding_closure(call: ast.Call, ctx: Context) -> str | None:
    """The name of a function defined in the current function, passed to ``call`` as an
    argument (a decoding step handed to a beam search), whose body runs a forward pass."""
    names = [a.id for a in call.args if type(a) is ast.Name] + [
        kw.value.id for kw in call.keywords if type(kw.value) is ast.Name]
    if not names:
        return None
    memo = ctx.scratch.setdefault(_CLOSURES, {})
    found = memo.get(id(ctx.fn.node))
    if found is None:  # once per function: the nested functions that run forward passes
        found = memo[id(ctx.fn.node)] = {
            stmt.name for stmt in walk(ctx.fn.node)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
            and stmt is not ctx.fn.node
            and any(type(sub) is ast.Call and ctx.flow.is_forward(sub, strict=True)
                    for sub in walk(stmt))}
    return next((n for n in names if n in found), None)


def branch_end(fn: ast.AST, line: int) -> int | None:
    """The last line of the innermost branch of an ``if`` of ``fn`` that holds ``line``
    (nested functions aside), or ``None`` when no ``if`` does."""
    best: tuple[int, int] | None = None
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if type(node) is ast.If:
            for branch in (node.body, node.orelse):  # type: ignore[attr-defined]
                if branch and branch[0].lineno <= line <= (branch[-1].end_lineno or 0) and (
                        best is None or branch[0].lineno >= best[0]):
                    best = (branch[0].lineno, branch[-1].end_lineno or 0)
        todo.extend(ast.iter_child_nodes(node))
    return best[1] if best else None
