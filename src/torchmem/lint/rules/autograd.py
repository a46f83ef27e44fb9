"""TMM4xx: autograd and storage APIs used in ways that are unsafe, deprecated or fail.

Legacy or misused APIs around autograd and storages: ``.data``, ``.storage()``, in-place
updates of parameters with recording on, and ``checkpoint`` without ``use_reentrant``.
These rules need evidence that the receiver is a tensor (a parameter, a model output, a
factory result, ``.weight``/``.bias``/``.grad``), so ``dataset.data`` stays silent.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import CONTAINER, GRAPH, LEAF, MODEL, TYPED, VALUE
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import is_inplace_method
from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._common import describe

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["TensorData", "DeprecatedStorage", "InplaceOnLeaf", "CheckpointReentrant"]

_TENSOR_ATTRS = frozenset({"weight", "bias", "grad", "running_mean", "running_var"})


def _tensor_evidence(node: ast.expr, ctx: Context) -> bool:
    kind = ctx.kind(node)
    if kind & CONTAINER:
        return False  # a list or dict of tensors: its .data is something else
    if kind & VALUE:
        return True
    if kind & MODEL:
        return False
    return ctx.torch_imported and type(node) is ast.Attribute and node.attr in _TENSOR_ATTRS


@register
class TensorData(Rule):
    """``tensor.data``: a view that autograd cannot see.

    What:
        Flags reading or assigning ``.data`` on a value known to be a tensor (a parameter,
        a model output, a factory result, a ``.weight``/``.bias``/``.grad``).

    Why:
        ``x.data`` returns a tensor that shares ``x``'s storage but has its own version
        counter and ``requires_grad=False``. An in-place change through it is invisible to
        autograd: if ``x`` was saved for backward, the gradient is silently computed from
        the modified values instead of raising an error. ``x.detach()`` shares storage
        too but keeps the version counter, so autograd detects the misuse. For in-place
        parameter updates, ``with torch.no_grad():`` is the documented way.

    Known problems:
        The fix changes behaviour where the code relies on autograd not noticing an
        in-place change (that code computes wrong gradients or will raise after the fix),
        so it is offered as an unsafe fix. Assignments (``p.data = t``) get no fix: use
        ``with torch.no_grad(): p.copy_(t)``.

    Example:
        ```python
        for p in model.parameters():
            p.data.add_(p.grad.data, alpha=-lr)
        ```

    Use instead:
        ```python
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)
        ```
    """

    code = "TMM401"
    category = "hygiene"
    default_enabled = False
    name = "tensor-data"
    summary = ".data bypasses autograd's checks; use .detach() or torch.no_grad()"
    fix_title = "Replace .data with .detach()"
    fix_safety = "unsafe"

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        if type(node.target) is ast.Attribute and node.target.attr == "data":
            ctx.scratch.setdefault(self.code, set()).add(id(node.target))

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        if node.attr != "data" or not _tensor_evidence(node.value, ctx):
            return
        recv = describe(node.value)
        if id(node) in ctx.scratch.get(self.code, ()):
            ctx.report(self, node, (
                f"in-place update through '{recv}.data' is hidden from autograd (gradients can "
                f"be silently wrong); update '{recv}' under 'with torch.no_grad():'"))
            return
        if type(node.ctx) is not ast.Load:
            ctx.report(self, node, (
                f"assigning '{recv}.data' swaps the tensor's contents behind autograd's back; "
                f"use 'with torch.no_grad(): {recv}.copy_(...)'"))
            return
        _, _, vl, vc = ctx.span(node.value)
        _, _, el, ec = ctx.span(node)
        fix = None
        typed = ctx.kind(node.value) & TYPED or node.value.__class__ is ast.Attribute and \
            node.value.attr in _TENSOR_ATTRS  # type: ignore[attr-defined]
        if typed and vl == el and ctx.text(vl, vc, el, ec).replace(" ", "") == ".data":
            fix = [ctx.edit((vl, vc), (el, ec), ".detach()")]
        ctx.report(self, node, (
            f"'{recv}.data' shares storage with '{recv}' but hides in-place changes from "
            f"autograd (gradients can be silently wrong); use '{recv}.detach()', or "
            f"torch.no_grad() for in-place updates"), fix)


_SAME_ON_UNTYPED = frozenset({"data_ptr", "nbytes", "device", "is_pinned", "is_shared",
                              "is_cuda"})


@register
class DeprecatedStorage(Rule):
    """``tensor.storage()`` is deprecated; use ``tensor.untyped_storage()``.

    What:
        Flags ``x.storage()`` in a file that imports torch.

    Why:
        ``Tensor.storage()`` returns a ``TypedStorage``, deprecated since PyTorch 2.0 (it
        warns, and will be removed). ``untyped_storage()`` returns the byte-level storage
        that tensors actually share. Comparing ``data_ptr()`` of the two gives the same
        answer, but ``size()``/``len()`` count elements on a ``TypedStorage`` and bytes on
        an ``UntypedStorage``.

    Known problems:
        A non-tensor object with a ``storage()`` method in a torch-importing file is
        flagged. Calls inside an ``except`` handler are taken as fallbacks for old PyTorch
        versions and not flagged. The fix is safe when the result is only used for ``data_ptr()``,
        ``nbytes()``, ``device``, ``is_pinned()`` or ``is_shared()``, which agree on both
        storages; otherwise it is unsafe.

    Example:
        ```python
        same = a.storage().data_ptr() == b.storage().data_ptr()
        ```

    Use instead:
        ```python
        same = a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        ```
    """

    code = "TMM402"
    category = "hygiene"
    default_enabled = False
    name = "deprecated-storage"
    summary = "Tensor.storage() is deprecated; use untyped_storage()"
    fix_title = "Replace .storage() with .untyped_storage()"
    fix_safety = "unsafe"

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        if node.attr in _SAME_ON_UNTYPED and type(node.value) is ast.Call:
            ctx.scratch.setdefault(self.code, set()).add(id(node.value))

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if type(func) is not ast.Attribute or func.attr != "storage" or node.args \
                or node.keywords or not ctx.torch_imported or ctx.handler_depth:
            return  # (in an except handler it is a fallback for old PyTorch versions)
        if key_of(func.value) in ("self", "cls") or ctx.kind(func.value) & MODEL:
            return
        if ctx.qualname(func) is not None:
            return
        _, _, vl, vc = ctx.span(func.value)
        _, _, el, ec = ctx.span(func)
        fix = None
        if vl == el and ctx.text(vl, vc, el, ec).replace(" ", "") == ".storage":
            fix = [ctx.edit((el, ec - len("storage")), (el, ec), "untyped_storage")]
        safe = id(node) in ctx.scratch.get(self.code, ())
        recv = describe(func.value)
        msg = (f"'{recv}.storage()' returns a deprecated TypedStorage; use "
               f"'{recv}.untyped_storage()'")
        if fix and safe:
            ctx.report(_SafeStorageFix, node, msg, fix)
        else:
            ctx.report(self, node, msg, fix)


class _SafeStorageFix(DeprecatedStorage):
    """Same rule; the result is used only where both storages agree, so the fix is safe."""

    fix_safety = "safe"  # type: ignore[assignment]


_FROZEN_COPY = re.compile(r"(ema|shadow|target|teacher|momentum|avg|average|swa|frozen|copy)",
                          re.IGNORECASE)


@register
class InplaceOnLeaf(Rule):
    """An in-place operation on a leaf tensor that requires grad, outside ``no_grad``.

    What:
        Flags ``w.add_(...)``, ``w += ...``, ``w[i] = ...``, ``w.zero_()`` and other
        in-place operations on a tensor created with ``requires_grad=True``, an
        ``nn.Parameter``, or a parameter from ``model.parameters()``, when the code is not
        under ``torch.no_grad()`` / ``torch.inference_mode()``.

    Why:
        Autograd cannot record an in-place change to a leaf that requires grad: PyTorch
        raises ``RuntimeError: a leaf Variable that requires grad is being used in an
        in-place operation``. Parameter updates and initialisation must run without
        recording. (An in-place op on a *non-leaf* is fine unless autograd saved that
        tensor for backward.)

    Known problems:
        A function that its caller always runs under ``no_grad`` is flagged; decorate it
        with ``@torch.no_grad()``. Parameters of a module frozen elsewhere
        (``requires_grad_(False)`` in another function) are not known to be frozen; loops
        over ``ema``/``target``/``teacher`` models are assumed frozen and not flagged.
        ``module.weight.copy_(...)`` is not flagged: conversion helpers that do it are
        nearly always called under ``no_grad``.

    Example:
        ```python
        w = torch.randn(10, requires_grad=True)
        w.add_(1.0)
        ```

    Use instead:
        ```python
        w = torch.randn(10, requires_grad=True)
        with torch.no_grad():
            w.add_(1.0)
        ```
    """

    code = "TMM403"
    category = "correctness"
    name = "inplace-on-leaf"
    summary = "in-place op on a leaf tensor that requires grad, outside torch.no_grad()"

    def _leaf(self, node: ast.expr, ctx: Context) -> str | None:
        if ctx.no_grad:
            return None
        if type(node) is ast.Attribute and node.attr in ("weight", "bias"):
            return None  # module.weight.copy_(...) in conversion helpers run under no_grad
        kind = ctx.kind(node)
        if not kind & LEAF or kind & (GRAPH | CONTAINER):
            return None  # (a dict or list holding a parameter is not the parameter)
        key = key_of(node)
        if key is None:
            return None
        facts = ctx.fn.facts
        if facts.grad_disabled_keys:
            return None
        for value in facts.defs.get(key, ()):
            text = ast.unparse(value) if type(value) in (ast.Call, ast.Attribute, ast.Name) else ""
            if _FROZEN_COPY.search(text):
                return None
        if _FROZEN_COPY.search(key.partition(".")[0]):
            return None
        return key

    def _report(self, node: ast.AST, key: str, op: str, ctx: Context) -> None:
        ctx.report(self, node, (
            f"in-place {op} on '{key}', a leaf tensor that requires grad, outside "
            f"torch.no_grad(): PyTorch raises 'a leaf Variable that requires grad is being "
            f"used in an in-place operation'; do it under 'with torch.no_grad():'"))

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if type(func) is not ast.Attribute or not is_inplace_method(func.attr):
            return
        key = self._leaf(func.value, ctx)
        if key is not None:
            self._report(node, key, f"'{func.attr}'", ctx)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        target = node.target
        base = target.value if type(target) is ast.Subscript else target
        key = self._leaf(base, ctx)  # type: ignore[arg-type]
        if key is not None:
            self._report(node, key, "update", ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        for target in node.targets:
            if type(target) is ast.Subscript:
                key = self._leaf(target.value, ctx)
                if key is not None:
                    self._report(node, key, "item assignment", ctx)
                    return


_CHECKPOINT = frozenset({"torch.utils.checkpoint.checkpoint",
                         "torch.utils.checkpoint.checkpoint_sequential"})


@register
class CheckpointReentrant(Rule):
    """``torch.utils.checkpoint.checkpoint`` called without an explicit ``use_reentrant``.

    What:
        Flags ``checkpoint(fn, *args)`` and ``checkpoint_sequential(...)`` calls that do
        not pass ``use_reentrant=``.

    Why:
        Without the argument, PyTorch warns and falls back to the legacy reentrant
        implementation, announced to become an error. The reentrant variant does not
        support ``torch.autograd.grad``, keyword arguments or inputs that do not require
        grad (parameters inside then receive no gradient, silently), and it recomputes
        under different rules. ``use_reentrant=False`` is the recommended variant and
        also stops recomputation early to save memory.

    Known problems:
        The fix passes ``use_reentrant=False``, which changes behaviour (for the better,
        in nearly every case), so it is an unsafe fix; pass ``use_reentrant=True`` by hand
        to keep the old behaviour and silence the warning.

    Example:
        ```python
        from torch.utils.checkpoint import checkpoint
        y = checkpoint(self.block, x)
        ```

    Use instead:
        ```python
        from torch.utils.checkpoint import checkpoint
        y = checkpoint(self.block, x, use_reentrant=False)
        ```
    """

    code = "TMM404"
    category = "hygiene"
    default_enabled = False
    name = "checkpoint-use-reentrant"
    summary = "checkpoint() without an explicit use_reentrant argument"
    fix_title = "Pass use_reentrant=False"
    fix_safety = "unsafe"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        name = func.id if type(func) is ast.Name else getattr(func, "attr", "")
        if not name.startswith("checkpoint") or ctx.qualname(func) not in _CHECKPOINT:
            return
        for kw in node.keywords:
            if kw.arg is None or kw.arg == "use_reentrant":
                return
        parts = list(node.args) + [kw.value for kw in node.keywords]
        fix = None
        if parts:
            last = max(parts, key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))
            _, _, el, ec = ctx.span(last)
            fix = [ctx.edit((el, ec), (el, ec), ", use_reentrant=False")]
        ctx.report(self, node, (
            f"{describe(node.func)}() without use_reentrant= falls back to the legacy "
            f"reentrant implementation (with a warning; announced to become an error); pass "
            f"use_reentrant=False"), fix)
