"""Kinds of calls to resolved library functions and classes (``torch.*``, ``torchvision``...).

:func:`qualified_kind` answers, for a call whose callee the import table resolves to a
fully qualified name, what the result is: a model (``torch.nn.Linear(...)``,
``torchvision.models.resnet18()``), an optimizer, a loader, a factory tensor, a tensor
derived from the arguments (``torch.matmul``), or unknown. No torch.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.kinds import (
    GRAPH,
    LEAF,
    LOADER,
    MODEL,
    OPTIM,
    PINNED,
    TENSOR,
    TYPE,
    TYPED,
    UNPINNED,
)
from torchmem.lint.knowledge import FACTORIES, NO_GRAPH_FUNCTIONS, TUPLE_RESULTS

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.dataflow import Flow

__all__ = ["qualified_kind"]

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
