"""Running statistics folded into a module's buffer with the input's graph (no torch).

``self.running_mean.mul_(1 - m).add_(mean * m)`` in the ``forward`` of a layer, with
``mean = inputs.mean(0)`` computed while autograd records: the buffer becomes a tensor
with history, and each call chains its graph (and the activations the input's graph
saved) onto the buffer's previous value, which lives as long as the module. The fix is
``mean.detach()`` (or the update under ``torch.no_grad()``).

What counts: an update of ``self.<name>`` (or of an item of it, ``self.<name>[:, 0] = ...``),
registered with ``register_buffer`` in the class or a base class of the file, or a running
statistic inherited from a torch normalisation layer (``class MyBN(nn.BatchNorm2d)``), that
decays its old value as a running statistic does (an in-place chain with
``mul_`` or ``lerp_``: ``self.m.mul_(1 - k).add_(x)``; ``self.m = (1 - k) * self.m + ...``,
``self.m.copy_((1 - k) * self.m + ...)``; ``self.m.add_((1 - k) * x)`` after
``self.m.mul_(k)`` in a statement of its own; ``self.m = lerp(self.m, x, k)`` through a helper of
the file that updates its argument in place, ``old.lerp_(new, 1 - k)``;
a plain running sum ``self.m = self.m + x`` is not read), in ``forward`` of an ``nn.Module`` class that is a layer inside a trained network, whose
inputs are activations with a graph: it has parameters of its own, derives from a torch
normalisation layer, or another class of the file builds it (a module without parameters
used on its own may be an input normaliser fed plain data), outside ``torch.no_grad()``, and an
argument computed from a parameter of ``forward`` with no ``.detach()``, ``.data`` or
``.item()`` on the way. A forward that detaches the buffer itself
(``self.running_mean = self.running_mean.detach()``) drops the previous call's graph on
each call and is not reported.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of
from torchmem.lint.folds import helper_updates
from torchmem.lint.kinds import LEAF
from torchmem.lint.knowledge import last_name

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["buffer_fold", "cuts_graph"]

_SCRATCH = "buffer_fold"
_INPLACE = frozenset({"add_", "sub_", "mul_", "div_", "copy_", "lerp_", "addcmul_",
                      "addcdiv_", "set_"})
_CLEAN = frozenset({"detach", "item", "tolist", "numpy", "float", "int", "len", "size", "dim",
                    "numel", "nelement", "element_size"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


#: torch classes whose instances have running statistics as buffers (and affine parameters)
_TORCH_NORMS = frozenset({"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm",
                          "_BatchNorm", "_NormBase", "InstanceNorm1d", "InstanceNorm2d",
                          "InstanceNorm3d", "_InstanceNorm"})
_NORM_BUFFERS = frozenset({"running_mean", "running_var"})


def _lineage(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> list[ast.ClassDef | str]:
    """The class, its base classes of the file (transitively) and the names of the others."""
    out: list[ast.ClassDef | str] = []
    stack: list[ast.ClassDef | str] = [cls]
    seen: set[str] = set()
    while stack:
        node = stack.pop()
        name = node if isinstance(node, str) else node.name
        if name in seen:
            continue
        seen.add(name)
        out.append(node)
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                key = last_name(key_of(base) or "")
                stack.append(classes.get(key, key))
    return out


def _buffers(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> frozenset[str]:
    """Names registered with ``self.register_buffer("name", ...)`` in the class or a base
    class of the file, and the running statistics of a torch normalisation base."""
    out = set()
    for node in _lineage(cls, classes):
        if isinstance(node, str):
            if node in _TORCH_NORMS:
                out |= _NORM_BUFFERS
            continue
        for call in ast.walk(node):
            if type(call) is ast.Call and type(call.func) is ast.Attribute and \
                    call.func.attr == "register_buffer" and call.args and \
                    isinstance(call.args[0], ast.Constant) and \
                    isinstance(call.args[0].value, str):
                out.add(call.args[0].value)
    return frozenset(out)


def _inside_network(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> bool:
    """Whether the class derives from a torch normalisation layer, or another class of the
    file builds it in its ``__init__`` (``self.bn = bn(c)``): a layer of a network, whose
    inputs are activations."""
    if any(isinstance(n, str) and n in _TORCH_NORMS for n in _lineage(cls, classes)):
        return True
    for other in classes.values():
        if other is cls:
            continue
        for node in ast.walk(other):
            if type(node) is ast.Call and last_name(key_of(node.func) or "") == cls.name:
                return True
    return False


def _self_attribute(target: ast.expr) -> str | None:
    """The ``X`` of ``self.X`` at the bottom of ``target``: ``self.X`` itself, an item of
    it (``self.X[:, 0]``), or the receiver of an in-place chain on it
    (``self.X.mul_(m).add_``); else None."""
    recv = target.value if type(target) is ast.Attribute and target.attr in _INPLACE \
        else target  # type: ignore[attr-defined]
    if type(recv) is ast.Subscript:
        recv = recv.value
    while type(recv) is ast.Call and type(recv.func) is ast.Attribute and \
            recv.func.attr in _INPLACE:  # type: ignore[attr-defined]
        recv = recv.func.value  # type: ignore[attr-defined]
    if type(recv) is ast.Attribute and type(recv.value) is ast.Name and \
            recv.value.id == "self":  # type: ignore[attr-defined]
        return recv.attr  # type: ignore[attr-defined]
    return None


def _is_self(node: ast.AST, name: str) -> bool:
    """``self.name``, or an item of it (``self.name[:, 0]``)."""
    if type(node) is ast.Subscript:
        node = node.value
    return type(node) is ast.Attribute and type(node.value) is ast.Name and \
        node.value.id == "self" and node.attr == name


def _scaled_alone(fn: ast.AST, name: str) -> bool:
    """Whether ``fn`` scales ``self.name`` in place in a statement of its own
    (``self.running_var.mul_(m)`` before ``self.running_var.add_((1 - m) * var)``)."""
    for node in ast.walk(fn):
        if type(node) is ast.Expr and type(node.value) is ast.Call:
            func = node.value.func
            if type(func) is ast.Attribute and func.attr in ("mul_", "div_") and \
                    _is_self(func.value, name):
                return True
    return False


def _buffer(func: ast.Attribute, buffers: frozenset[str], args: list[ast.expr],
            fn: ast.AST) -> str | None:
    """``name`` when ``func`` is an in-place update of ``self.name`` that decays its old
    value, a running statistic: ``self.name.mul_(1 - m).add_(...)``, ``.lerp_(...)``,
    ``self.name.copy_((1 - m) * self.name + ...)``, or an ``add_`` after the function
    scaled the buffer in a statement of its own (``self.name.mul_(m)``)."""
    recv, decays = func.value, func.attr == "lerp_"
    while type(recv) is ast.Call and type(recv.func) is ast.Attribute and \
            recv.func.attr in _INPLACE:
        decays = decays or recv.func.attr in ("mul_", "lerp_")
        recv = recv.func.value
    if type(recv) is ast.Attribute and type(recv.value) is ast.Name and \
            recv.value.id == "self" and recv.attr in buffers and \
            (decays or any(_decayed(a, recv.attr) for a in args) or (
                func.attr in ("add_", "addcmul_") and _scaled_alone(fn, recv.attr))):
        return recv.attr
    return None


def _decayed(value: ast.AST, name: str) -> bool:
    """Whether ``value`` scales the buffer's old value (``(1 - m) * self.name + ...``)."""
    return any(type(n) is ast.BinOp and type(n.op) is ast.Mult and
               (_is_self(n.left, name) or _is_self(n.right, name)) for n in ast.walk(value))


def _from_input(expr: ast.AST, params: frozenset[str], defs: dict[str, list[ast.expr]],
                seen: set[str]) -> bool:
    """Whether ``expr`` is computed from one of ``params`` without a detaching step."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr in _CLEAN:
            continue
        if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in _CLEAN:
            continue
        if type(node) is ast.Attribute and node.attr in ("data", "shape", "dtype", "device"):
            continue
        if type(node) is ast.Name:
            if node.id in params:
                return True
            if node.id not in seen and node.id in defs:
                seen.add(node.id)
                stack.extend(defs[node.id])
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _helper_args(value: ast.expr, ctx: Context) -> list[ast.expr]:
    """The arguments that ``value``, a call to a helper of the file, updates in place
    (``lerp(self.embed_avg, embed_sum, self.decay)`` where ``lerp`` runs ``old.lerp_(...)``)."""
    if type(value) is not ast.Call or ctx.summaries is None:
        return []
    return helper_updates(value, ctx.summaries.functions)  # type: ignore[arg-type]


def cuts_graph(fn: ast.AST, name: str) -> bool:
    """Whether ``fn`` detaches the buffer itself (``self.name = self.name.detach()``,
    ``self.name.detach_()``): each call then drops the previous call's graph."""
    for node in ast.walk(fn):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr in ("detach", "detach_") and \
                type(node.func.value) is ast.Attribute and node.func.value.attr == name and \
                type(node.func.value.value) is ast.Name and node.func.value.value.id == "self":
            return True
    return False


def buffer_fold(node: ast.AST, ctx: Context) -> tuple[str, ast.expr] | None:
    """``(buffer, value)`` when ``node`` folds a graph-carrying statistic of the forward's
    input into a registered buffer: an in-place call on it, or ``self.<buffer> = ...`` /
    ``self.<buffer> += ...`` (see the module docstring)."""
    fn = ctx.fn
    if fn is None or ctx.no_grad or not ctx.in_module_class or fn.name != "forward" or \
            ctx.summaries is None:
        return None
    if type(node) is ast.Call:
        if type(node.func) is not ast.Attribute or node.func.attr not in _INPLACE or \
                not node.args:
            return None
        target: ast.expr = node.func
        values: list[ast.expr] = list(node.args)
    elif type(node) is ast.Assign and len(node.targets) == 1:
        target, values = node.targets[0], [node.value]
    elif type(node) is ast.AugAssign:
        target, values = node.target, [node.value]
    else:
        return None
    if _self_attribute(target) is None:
        return None  # not an attribute of self: no buffer, whatever the class registers
    cls = ctx.summaries.classes.get(fn.class_name or "")
    if cls is None or not any(s is fn.node for s in cls.body):
        return None
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    if id(cls) not in memo:
        classes = ctx.summaries.classes
        own = any(kind & LEAF for kind in (ctx.class_attrs or {}).values()) or \
            _inside_network(cls, classes)
        memo[id(cls)] = _buffers(cls, classes) if own else frozenset()
    if not memo[id(cls)]:
        return None
    if type(node) is ast.Call:
        name = _buffer(target, memo[id(cls)], values, fn.node)  # type: ignore[arg-type]
    else:
        attr = _self_attribute(target)
        name = attr if attr in memo[id(cls)] and (_decayed(values[0], attr) or any(
            _is_self(a, attr) for a in _helper_args(values[0], ctx))) else None
    if name is None or cuts_graph(fn.node, name):
        return None
    args = fn.node.args  # type: ignore[attr-defined]
    params = frozenset(a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
                       if a.arg != "self")
    for value in values:
        if _from_input(value, params, fn.facts.defs, set()):
            return name, value
    return None
