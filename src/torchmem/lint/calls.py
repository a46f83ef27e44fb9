"""What a call evaluates to in the data flow, and whether it runs a forward pass (no torch).

:func:`call_kind` is :meth:`Flow.kind <torchmem.lint.dataflow.Flow.kind>` for calls: module
forward passes, tensor methods, builtins, functions of the same file (through their
summaries, :mod:`torchmem.lint.summaries`) and callees known only by name (``criterion``).
:func:`qualified_kind` answers for a call whose callee the import table resolves to a fully
qualified name: a model (``torch.nn.Linear(...)``, ``torchvision.models.resnet18()``), an
optimizer, a loader, a factory tensor, a tensor derived from the arguments
(``torch.matmul``), or unknown. :func:`is_forward` tells whether a call runs a forward pass.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of
from torchmem.lint.kinds import (
    ACT,
    CONTAINER,
    GRAPH,
    LEAF,
    LOADER,
    MODEL,
    MODULES,
    NAMED,
    OPTIM,
    PARAMS,
    PINNED,
    TENSOR,
    TYPE,
    TYPED,
    UNPINNED,
    VALUE,
    held,
)
from torchmem.lint.knowledge import (
    FACTORIES,
    GRAPH_FREE_BUILTINS,
    LOSS_NAME,
    MODEL_STEP_METHODS,
    MOVE_METHODS,
    NO_GRAPH_FUNCTIONS,
    NO_GRAPH_METHODS,
    PASS_THROUGH_BUILTINS,
    SCALAR_METHODS,
    TUPLE_RESULTS,
    VERB_PREFIX,
    is_model_name,
    last_name,
)

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.dataflow import Flow

__all__ = ["call_kind", "is_forward", "qualified_kind", "transform_kind"]

#: module methods that return the module itself
_MODULE_SELF = frozenset({
    "to", "cuda", "cpu", "train", "eval", "half", "float", "double", "bfloat16",
    "requires_grad_", "type", "apply", "share_memory", "to_empty", "xpu", "mps",
})
#: module methods that run (part of) a forward pass
_FORWARD_LIKE = frozenset({
    "forward", "__call__", "encode", "decode", "extract_features", "forward_features",
    "embed", "features",
})
#: builtins that return a container of their arguments' elements
_CONTAINER_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed", "iter", "next", "set",
                                 "dict"})
#: torch sub-namespaces whose functions do not compute tensors from tensors
_OTHER_NS = frozenset({
    "cuda", "distributed", "backends", "jit", "onnx", "utils", "cpu", "mps", "xpu", "hub",
    "profiler", "amp", "autograd", "random", "testing", "fx", "compiler", "_dynamo", "export",
    "library", "multiprocessing", "overrides", "package", "quantization", "ao", "accelerator",
})


def _const_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _const_false(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _kwarg(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def qualified_kind(self: Flow, qual: str, node: ast.Call) -> int:
    """Kind of a call to an imported (resolved) function or class."""
    parts = qual.split(".")
    root, last = parts[0], parts[-1]
    if root != "torch":
        if root in ("torchvision", "timm") and ("models" in parts or last == "create_model"):
            return MODEL
        if root == "transformers" and last == "from_pretrained" and len(parts) >= 2 and (
                "Model" in parts[-2] or "For" in parts[-2]):
            return MODEL
        if last == "checkpoint" and "checkpoint" in parts:
            return self.derive(self._args_kind(node)) or self.forward()
        return 0
    sub = parts[1] if len(parts) > 2 else ""
    upper = last[:1].isupper()
    if sub == "nn" and upper:
        if last == "Parameter":
            rg = _kwarg(node, "requires_grad")
            if rg is None and len(node.args) > 1:
                rg = node.args[1]
            return TYPED | (TENSOR if _const_false(rg) else LEAF)
        if "utils" in parts or "functional" in parts or "init" in parts:
            return 0
        return MODEL
    if sub == "optim":
        if not upper or "lr_scheduler" in parts:
            return 0
        if last == "AveragedModel":
            return MODEL
        return OPTIM
    if last == "DataLoader":
        pin = _kwarg(node, "pin_memory")
        if _const_true(pin):
            return LOADER | PINNED
        if pin is None and any(kw.arg is None for kw in node.keywords):
            return LOADER
        return LOADER | (UNPINNED if pin is None or _const_false(pin) else 0)
    if last in ("checkpoint", "checkpoint_sequential") and "checkpoint" in parts:
        return self.forward()
    if qual == "torch.autograd.grad":  # a tuple of gradients
        return GRAPH if _const_true(_kwarg(node, "create_graph")) and not self.ctx.no_grad \
            else TENSOR
    if qual == "torch.compile":
        return self.kind(node.args[0]) & TYPE if node.args else 0
    if last in FACTORIES and sub in ("", "random"):
        if _const_true(_kwarg(node, "requires_grad")):
            return LEAF | TYPED
        if _const_true(_kwarg(node, "pin_memory")):
            return TENSOR | PINNED | TYPED
        if _kwarg(node, "device") is None and last in ("zeros", "ones", "empty", "full",
                                                        "rand", "randn", "tensor", "arange"):
            return TENSOR | UNPINNED | TYPED
        return TENSOR | TYPED
    if last in NO_GRAPH_FUNCTIONS:
        return TENSOR | (0 if last in TUPLE_RESULTS else TYPED)
    if sub in _OTHER_NS:
        return 0
    if upper:
        return TENSOR | TYPED if last.endswith("Tensor") else 0
    kind = self.derive(self._args_kind(node)) or TENSOR | TYPED
    return kind & ~TYPED if last in TUPLE_RESULTS else kind


def call_kind(self: Flow, node: ast.Call) -> int:
    """Kind of the result of ``node`` (a call) at the current point of ``self``."""
    func = node.func
    ctx = self.ctx
    tf = type(func)
    if tf is ast.Attribute:
        qual = ctx.qualname(func)
        if qual is not None:
            return _imported_kind(self, node) or qualified_kind(self, qual, node)
        attr = func.attr  # type: ignore[attr-defined]
        if attr in SCALAR_METHODS:
            return 0
        recv_node = func.value  # type: ignore[attr-defined]
        recv = self.kind(recv_node)
        if attr in NO_GRAPH_METHODS:
            return TENSOR | (recv & TYPED)
        if recv & MODEL:
            if attr in _FORWARD_LIKE:
                return self.forward()
            if attr in _MODULE_SELF:
                return recv & TYPE
            if attr == "parameters":
                return PARAMS
            if attr == "named_parameters":
                return PARAMS | NAMED
            if attr in ("modules", "children"):
                return MODULES
            if attr in ("named_modules", "named_children"):
                return MODULES | NAMED
            return _method_of_file(self, node)  # model.compute_loss(out, y) of this file
        if recv & VALUE:
            typed = recv & TYPED and not recv & CONTAINER and attr not in TUPLE_RESULTS
            if attr == "pin_memory":
                return TENSOR | PINNED | (recv & TYPED)
            if attr in ("to", "cuda", "cpu") and not recv & (GRAPH | LEAF):
                return TENSOR | (recv & TYPED)
            if attr.endswith("_") and not attr.startswith("_"):
                return recv & VALUE
            if recv & CONTAINER:  # a method of a list/dict literal: values(), get(k)
                return recv & ~CONTAINER & VALUE if attr in ("get", "pop") else 0
            kind = self.derive(recv)
            return kind if typed else kind & ~TYPED
        if recv & (OPTIM | LOADER | PARAMS | MODULES):
            return 0
        if attr in MOVE_METHODS:
            return 0  # batch.to(device) of an object of unknown type: still unknown
        key = key_of(func)
        if key is not None:
            return _named_callee(self, key, attr, recv_node, node)
        return 0
    if tf is ast.Name:
        name = func.id  # type: ignore[attr-defined]
        qual = ctx.qualname(func)
        if qual is not None:
            return _imported_kind(self, node) or qualified_kind(self, qual, node)
        known = self.env.get(name, 0)
        if known & MODEL:
            return self.forward()
        if name in GRAPH_FREE_BUILTINS:
            return 0
        if name in PASS_THROUGH_BUILTINS:
            kinds = self._args_kind(node)
            if name in _CONTAINER_BUILTINS:
                return held(kinds) if kinds & VALUE else kinds
            return self.derive(kinds)
        if name in ctx.module_classes:
            return MODEL
        if name == "self" and ctx.in_module_class:
            return self.forward()
        return _named_callee(self, name, name, None, node)
    return 0

def _imported_kind(self: Flow, node: ast.Call) -> int:
    """Kind of a call to a function imported from another file of the linted tree, from
    its summary (0 when it is not one, or returns nothing graph-related)."""
    summaries = self.ctx.summaries
    if summaries is None:
        return 0
    summary = summaries.summarize(node, self)
    return summary.returns if summary is not None else 0


def _method_of_file(self: Flow, node: ast.Call) -> int:
    """Kind of ``model.method(...)`` for a model whose class the summaries resolve (a
    method of a module class of the linted tree, ``model.compute_loss(scores, y)``), from
    the method's summary; 0 when it cannot be resolved."""
    summaries = self.ctx.summaries
    if summaries is None:
        return 0
    summary = summaries.summarize(node, self)
    return summary.returns if summary is not None else 0


def _named_callee(self: Flow, key: str, last: str, recv: ast.expr | None, node: ast.Call) -> int:
    """Kind of ``key(...)`` for a callee the linter knows only by name (or by the
    summary of a function of the same file)."""
    summaries = self.ctx.summaries
    if summaries is not None:
        summary = summaries.summarize(node, self)
        if summary is not None and summary.returns:
            return summary.returns
    if key.endswith(".forward"):
        key = key[:-8]
        last = last_name(key)
    if self.ctx.class_attrs and key.startswith("self.") and key.count(".") == 1:
        if self.ctx.class_attrs.get(last, 0) & MODEL:
            return self.forward()
    if key in self.facts.backward_callees():
        return self.forward()
    if key.count(".") <= 1 and is_model_name(last):
        return self.forward()
    if VERB_PREFIX.match(last):
        return 0
    if LOSS_NAME.search(last):  # may return a tuple or dict (loss, logging output)
        return self.derive(self._args_kind(node)) & ~TYPED
    if last == "from_pretrained" and recv is not None:
        owner = last_name(key_of(recv) or "")
        if "Model" in owner or "For" in owner:
            return MODEL
    return 0


def transform_kind(self: Flow, target: ast.expr, value: ast.expr) -> int:
    """Kind of ``x = self.transform(x)``: a callable the caller gave to ``__init__``,
    applied to ``x`` and rebinding ``x``, is taken to transform the value (a reshape, a
    post-processing step) and pass its graph through; 0 for anything else."""
    if type(target) is not ast.Name or type(value) is not ast.Call:
        return 0
    func = value.func  # type: ignore[attr-defined]
    if type(func) is not ast.Attribute or type(func.value) is not ast.Name or \
            func.value.id != "self" or not any(
                type(a) is ast.Name and a.id == target.id for a in value.args):  # type: ignore[attr-defined]
        return 0
    if not _supplied(self, func.attr):
        return 0
    return self.derive(self.kind(ast.Name(id=target.id, ctx=ast.Load()))) & (GRAPH | ACT)


def _supplied(self: Flow, attr: str) -> bool:
    """Whether ``self.<attr>`` is a callable given to the current class's ``__init__``."""
    from torchmem.lint.classes import supplied_callables

    ctx = self.ctx
    fn = ctx.fn
    summaries = ctx.summaries
    if fn is None or fn.class_name is None or summaries is None:
        return False
    cls = summaries.classes.get(fn.class_name)
    if cls is None:
        return False
    memo = ctx.scratch.setdefault("supplied_callables", {})
    found = memo.get(id(cls))
    if found is None:
        found = memo[id(cls)] = supplied_callables(cls)
    return attr in found

def is_forward(self: Flow, call: ast.Call, strict: bool = False) -> bool:
    """Whether ``call`` runs a module's forward pass (``model(x)``, ``self.net(x)``).

    With ``strict``, only modules known by type or by conventional name count, not
    callables known only because their result reaches ``backward()``.
    """
    slice_ = set() if strict else self.facts.backward_callees()
    func = call.func
    tf = type(func)
    if tf is ast.Name:
        name = func.id  # type: ignore[attr-defined]
        if self.ctx.qualname(func) is not None:
            return False
        if self.env.get(name, 0) & MODEL or (name == "self" and self.ctx.in_module_class):
            return True
        summaries = self.ctx.summaries
        if summaries is not None and name in summaries.functions and name not in self.env:
            return False  # _maybe_quantize_model(model): a function of the file, not a module
        return name in slice_ or is_model_name(name)
    if tf is ast.Subscript:  # self.model["generator"](z): an entry of a ModuleDict
        key = key_of(func.value)  # type: ignore[attr-defined]
        return key is not None and (bool(self.env.get(key, 0) & MODEL) or (
            key.count(".") <= 1 and is_model_name(last_name(key))))
    if tf is not ast.Attribute or self.ctx.qualname(func) is not None:
        return False
    attr = func.attr  # type: ignore[attr-defined]
    recv = self.kind(func.value)  # type: ignore[attr-defined]
    if recv & MODEL:
        return attr in _FORWARD_LIKE or attr in MODEL_STEP_METHODS
    if recv & VALUE:
        return False
    key = key_of(func)
    if key is None:
        return False
    if key.endswith(".forward"):
        key = key[:-8]
        if key.startswith("self.") and key.count(".") == 1:
            return True  # self.pipeline.forward(batch): only modules are called so
        if key == "self" and self.ctx.in_module_class:
            return True  # self.forward(x) in a module's method: like self(x)
    if self.env.get(key, 0) & MODEL:
        return True
    last = last_name(key)
    if self.ctx.class_attrs and key.startswith("self.") and key.count(".") == 1 and (
            self.ctx.class_attrs.get(last, 0) & MODEL):
        return True
    return key in slice_ or (key.count(".") <= 1 and is_model_name(last))
