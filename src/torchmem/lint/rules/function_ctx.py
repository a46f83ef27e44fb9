"""TMM107: a custom autograd Function that keeps its own output on ``ctx``.

Part of the TMM1xx family (:mod:`torchmem.lint.rules.graph`: graphs kept alive longer than
needed). ``forward(ctx, x)`` of a ``torch.autograd.Function`` that stores the tensor it
returns as an attribute of the context (``ctx.y = y``, ``return y``) makes a reference
cycle: the output refers to its ``grad_fn``, the node that owns ``ctx``, and ``ctx`` refers
back to the output. Reference counting never frees it; the output, the tensors the node
saved and the graph behind it stay alive until Python's cyclic garbage collector runs,
which is triggered by counts of Python objects, not by device memory. ``save_for_backward``
(which does not make the cycle) or a detached copy does not. Read from the class alone
(no torch).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import scope_nodes
from torchmem.lint.registry import Rule, register

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["FunctionCtxKeepsOutput"]

#: base classes of a custom autograd Function
_FUNCTION_BASES = frozenset({
    "torch.autograd.Function", "torch.autograd.function.Function",
    "torch.autograd.InplaceFunction", "torch.autograd.function.InplaceFunction"})



def _returned(fn: ast.FunctionDef) -> set[str]:
    """Names ``fn`` returns, alone or as elements of a returned tuple."""
    names: set[str] = set()
    for node in scope_nodes(fn.body):
        if type(node) is ast.Return and node.value is not None:
            value = node.value
            elts = value.elts if type(value) in (ast.Tuple, ast.List) else [value]
            names.update(e.id for e in elts if type(e) is ast.Name)
    return names


def _bound_lines(fn: ast.FunctionDef, name: str) -> list[int]:
    """Lines where ``fn`` binds ``name`` (assignments and loop targets)."""
    lines = []
    for node in scope_nodes(fn.body):
        targets: list[ast.AST] = []
        if type(node) is ast.Assign:
            targets = list(node.targets)
        elif type(node) in (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr):
            targets = [node.target]  # type: ignore[attr-defined]
        for target in targets:
            for sub in ast.walk(target):
                if type(sub) is ast.Name and sub.id == name:
                    lines.append(node.lineno)  # type: ignore[attr-defined]
    return lines


def _kept_outputs(fn: ast.FunctionDef) -> list[tuple[ast.Assign, str, str]]:
    """``(statement, attribute, name)`` for ``ctx.attr = name`` in ``forward`` where ``name``
    is bound by ``forward`` and returned as it was stored (not bound again after the store);
    in ``setup_context(ctx, inputs, output)``, ``ctx.attr = output``."""
    args = fn.args.posonlyargs + fn.args.args
    if not args:
        return []
    ctx_name = args[0].arg
    if fn.name == "setup_context":
        if len(args) != 3:
            return []
        outputs, returned = {args[2].arg}, {args[2].arg}
    else:
        outputs, returned = None, _returned(fn)
    found = []
    for node in scope_nodes(fn.body):
        if type(node) is not ast.Assign or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if type(target) is not ast.Attribute or type(target.value) is not ast.Name or \
                target.value.id != ctx_name or type(value) is not ast.Name:
            continue
        name = value.id
        if name not in returned:
            continue
        if outputs is None:
            bound = _bound_lines(fn, name)
            if not bound or any(line > node.lineno for line in bound):
                continue  # a parameter returned as it came, or rebound after the store
        found.append((node, target.attr, name))
    return found


@register
class FunctionCtxKeepsOutput(Rule):
    """A custom autograd Function that stores its output on ``ctx``.

    What:
        Flags, in ``forward(ctx, ...)`` of a subclass of ``torch.autograd.Function``,
        ``ctx.y = y`` where ``y`` is a tensor ``forward`` computes and returns (alone or in
        the returned tuple) as it was stored, and ``ctx.y = output`` in
        ``setup_context(ctx, inputs, output)``.

    Why:
        The output refers to its ``grad_fn``, the graph node that owns ``ctx``, and ``ctx``
        refers back to the output: a reference cycle. When the last reference to the output
        goes, nothing is freed: the output, the tensors the node saved and the graph behind
        it wait for Python's cyclic garbage collector, which runs on counts of Python
        objects, not on device memory, so every call's tensors pile up between collections.
        PyTorch's documentation asks for ``ctx.save_for_backward()`` for every tensor used
        in backward, "to prevent incorrect gradients and memory leaks"; it keeps the output
        without the cycle. A ``del ctx.y`` in ``backward()`` breaks the cycle only when
        ``backward()`` runs, not for outputs that no loss uses or for calls made with
        recording on outside training.

    Known problems:
        Off by default (on trial). Only the names ``forward`` returns are followed: an
        output stored under another name (``ctx.y = out`` then ``return out.view(...)``)
        or inside a container is not seen; inputs stored on ``ctx`` make no cycle and are
        not reported. Read from the class alone: a Function whose base class is defined in
        another file is not recognised.

    Example:
        ```python
        class Scan(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = scan(x)
                ctx.y = y
                return y
        ```

    Use instead:
        ```python
        class Scan(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = scan(x)
                ctx.save_for_backward(y)  # or ctx.y = y.detach()
                return y
        ```
    """

    code = "TMM107"
    name = "function-ctx-keeps-output"
    summary = "custom autograd Function stores its output on ctx: a reference cycle"
    default_enabled = False
    trial = True

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> None:
        if not any(ctx.qualname(b) in _FUNCTION_BASES for b in node.bases):
            return
        for stmt in node.body:
            if type(stmt) is not ast.FunctionDef or stmt.name not in ("forward",
                                                                      "setup_context"):
                continue
            for assign, attr, name in _kept_outputs(stmt):
                ctx.report(self, assign.targets[0], (
                    f"'ctx.{attr}' keeps '{name}', the output of this autograd Function: the "
                    f"output refers to its grad_fn, whose context refers back to it, so the "
                    f"output, the tensors the node saved and the graph behind it are freed "
                    f"only when Python's cyclic garbage collector runs (a del in backward() "
                    f"helps only when backward() runs); use ctx.save_for_backward({name}), "
                    f"or keep {name}.detach()"))
