"""Modules that a plain class puts in evaluation mode for good (no torch).

``self.lm = language_model; self.lm.eval()`` in ``__init__`` (or
``self.encoder = build().eval()``; or in a method that ``__init__`` calls on ``self``, such
as ``self._load_model(path)``), and no method of the class ever calls
``self.lm.train()``: the object uses the module for inference only (a scorer, a feature
extractor for a metric, a frozen teacher). Its forward passes in the other methods record
a graph for nothing unless they run under ``torch.no_grad()``.

Only classes that are not ``nn.Module`` count: a module's own forward may need the
gradient through a frozen sub-module (a perceptual loss), and its ``forward`` is judged
elsewhere.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import walk
from torchmem.lint.knowledge import is_model_name
from torchmem.lint.rules._base_hooks import base_hook

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["eval_only_attr"]

_SCRATCH = "eval_attrs"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _self_attr(node: ast.AST) -> str | None:
    """``X`` for ``self.X``."""
    if type(node) is ast.Attribute and type(node.value) is ast.Name and node.value.id == "self":
        return node.attr  # type: ignore[attr-defined]
    return None


def _mode_call(node: ast.AST, mode: str) -> ast.expr | None:
    """The receiver of ``<receiver>.eval()`` / ``.train()`` / ``.train(True)``."""
    if type(node) is not ast.Call or type(node.func) is not ast.Attribute or \
            node.func.attr != mode or node.keywords:  # type: ignore[attr-defined]
        return None
    args = node.args  # type: ignore[attr-defined]
    if mode == "eval" and args:
        return None
    if mode == "train" and args and not (isinstance(args[0], ast.Constant)
                                         and args[0].value is not False):
        return None
    return node.func.value  # type: ignore[attr-defined]


def _eval_only(cls: ast.ClassDef) -> frozenset[str]:
    init = next((s for s in cls.body if isinstance(s, _FUNCS) and s.name == "__init__"), None)
    if init is None:
        return frozenset()
    methods = {s.name: s for s in cls.body if isinstance(s, _FUNCS)}
    setup = [init]  # __init__ and the methods it calls on self (self._load_model(path))
    for node in walk(init):
        if type(node) is ast.Call and _self_attr(node.func) in methods and \
                _self_attr(node.func) != "__init__":
            setup.append(methods[_self_attr(node.func)])  # type: ignore[index]
    evaluated: set[str] = set()
    for node in (n for fn in setup for n in walk(fn)):
        receiver = _mode_call(node, "eval")
        if receiver is not None and _self_attr(receiver):
            evaluated.add(_self_attr(receiver))  # type: ignore[arg-type]
        if type(node) is ast.Assign and len(node.targets) == 1 and \
                _mode_call(node.value, "eval") is not None and _self_attr(node.targets[0]):
            evaluated.add(_self_attr(node.targets[0]))  # type: ignore[arg-type]
    if not evaluated:
        return frozenset()
    for node in walk(cls):
        receiver = _mode_call(node, "train")
        if receiver is not None:
            evaluated.discard(_self_attr(receiver) or "")
        if type(receiver) is ast.Name and receiver.id == "self":
            return frozenset()  # self.train() may switch every sub-module back
    return frozenset(evaluated)


def eval_only_attr(call: ast.Call, ctx: Context) -> str | None:
    """``X`` when ``call`` is ``self.X(...)`` (or ``self.X.forward(...)``, or a forward pass
    of one of its sub-modules, ``self.X.model.encoder(...)``) in a method of a plain class
    of this file whose ``__init__`` put ``self.X`` in eval mode for good."""
    fn = ctx.fn
    summaries = ctx.summaries
    if fn is None or fn.class_name is None or ctx.in_module_class or summaries is None:
        return None
    func = call.func
    if type(func) is ast.Attribute and func.attr == "forward":
        func = func.value
    attr = _self_attr(func)
    if attr is None:  # self.X.model.encoder(x): a sub-module of self.X named like a model
        root = func
        while type(root) is ast.Attribute and _self_attr(root) is None:
            root = root.value
        attr = _self_attr(root)
        if attr is None or root is func or not is_model_name(func.attr) or \
                base_hook(ctx):  # type: ignore[attr-defined]
            return None
    cls = summaries.classes.get(fn.class_name)
    if cls is None or not any(s is fn.node for s in cls.body):
        return None
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    attrs = memo.get(id(cls))
    if attrs is None:
        attrs = memo[id(cls)] = _eval_only(cls)
    return attr if attr in attrs else None
