"""What the linter knows of a class (no torch): whether it is an ``nn.Module``, and the
kinds of the attributes its set-up methods assign (``self.model = Net()``,
``self.register_buffer("mean", ...)``).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import all_statements
from torchmem.lint.context import FunctionState
from torchmem.lint.dataflow import Flow
from torchmem.lint.facts import FunctionFacts, key_of
from torchmem.lint.knowledge import last_name

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["class_attrs", "is_module_class", "supplied_callables", "SETUP_METHODS"]

_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
#: methods whose ``self.<attr> = ...`` assignments define a class's attribute kinds
SETUP_METHODS = frozenset({"__init__", "setup", "configure_model", "build", "_build",
                           "reset_parameters", "__post_init__"})


#: statement class -> the fields of it that :func:`class_attrs` descends into
_SETUP_BODIES: dict[type, tuple[str, ...]] = {}


def class_attrs(ctx: Context, node: ast.ClassDef) -> dict[str, int]:
    """Kinds of ``self.<attr> = value`` assignments in the class's set-up methods."""
    attrs: dict[str, int] = {}
    probe = Flow(ctx, FunctionFacts(), {})
    saved_fn, saved_ng = ctx.fn, ctx.no_grad
    ctx.fn = FunctionState(node, node.name, probe.facts, probe, False, node.name)
    ctx.no_grad = 0
    stack: list[ast.AST] = [s for s in node.body if type(s) in _FUNC_TYPES
                            and s.name in SETUP_METHODS]  # type: ignore[attr-defined]
    while stack:
        item = stack.pop()
        if type(item) is ast.Assign:
            kind = probe.kind(item.value)  # type: ignore[attr-defined]
            for target in item.targets:  # type: ignore[attr-defined]
                if type(target) is ast.Attribute and type(target.value) is ast.Name \
                        and target.value.id == "self":
                    attrs[target.attr] = attrs.get(target.attr, 0) | kind
        elif type(item) is ast.Expr and type(item.value) is ast.Call:  # type: ignore[attr-defined]
            call = item.value  # type: ignore[attr-defined]
            f = call.func
            if type(f) is ast.Attribute and f.attr in ("register_buffer", "register_parameter") \
                    and len(call.args) >= 2 and isinstance(call.args[0], ast.Constant) \
                    and isinstance(call.args[0].value, str):
                attrs[call.args[0].value] = 2 if f.attr == "register_parameter" else 4
        names = _SETUP_BODIES.get(type(item))
        if names is None:
            names = _SETUP_BODIES[type(item)] = tuple(
                n for n in ("body", "orelse", "handlers", "finalbody")
                if n in getattr(type(item), "_fields", ()))
        for name in names:  # none for a simple statement
            for s in getattr(item, name):
                if type(s) is not ast.ClassDef:
                    stack.append(s)
    ctx.fn, ctx.no_grad = saved_fn, saved_ng
    return attrs


def is_module_class(node: ast.ClassDef, ctx: Context) -> bool:
    """Whether a class is an ``nn.Module``: it defines ``forward()`` or derives from a
    module class (``torch.nn.*``, a module class of this file, ``*Module`` but not a
    Lightning-style ``*DataModule``)."""
    if any(type(s) in _FUNC_TYPES and s.name == "forward" for s in node.body):  # type: ignore[attr-defined]
        return True  # only modules define forward()
    for base in node.bases:
        key = key_of(base)
        if key is None:
            continue
        qual = ctx.qualname(base) or key
        tail = last_name(qual)
        if qual.startswith("torch.nn") or tail in ctx.module_classes or tail in (
                "Module", "LightningModule", "PreTrainedModel") or (
                tail.endswith("Module") and not tail.endswith("DataModule")):
            return True
    return False


def supplied_callables(node: ast.ClassDef) -> frozenset[str]:
    """Attributes that ``__init__`` sets from its own parameters and that the class does
    not define as methods (``self.transform = transform``): callables (or values) the
    caller supplies, whose calls the linter cannot see into."""
    init = next((s for s in node.body if type(s) in _FUNC_TYPES
                 and s.name == "__init__"), None)  # type: ignore[attr-defined]
    if init is None:
        return frozenset()
    args = init.args  # type: ignore[attr-defined]
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    methods = {s.name for s in node.body if type(s) in _FUNC_TYPES}  # type: ignore[attr-defined]
    out = set()
    for stmt in all_statements(init):
        if type(stmt) is ast.Assign and len(stmt.targets) == 1 and \
                type(stmt.value) is ast.Name and stmt.value.id in params:
            target = stmt.targets[0]
            if type(target) is ast.Attribute and type(target.value) is ast.Name and \
                    target.value.id == "self" and target.attr not in methods:
                out.add(target.attr)
    return frozenset(out)

