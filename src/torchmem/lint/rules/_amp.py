"""What the mixed-precision rules know about a file: its gradient scalers and autocast blocks.

A *scaler* is a name or attribute chain bound somewhere in the file to a ``GradScaler``
(``torch.amp.GradScaler("cuda")``, ``torch.cuda.amp.GradScaler()``, ``GradScaler()``
imported from either, ``ShardedGradScaler()``, or either branch of a conditional
expression), or a parameter annotated as one. Code that receives a scaler under another
name (``def train(model, scaler)``) is recognised by the scaler's API instead: see
:func:`scaler_evidence`. A scaler built with ``enabled=False`` (a literal) does nothing
and is left alone. Accelerate's ``accelerator.backward()`` and Lightning's precision
plugins keep their scaler out of sight: no scaler, no finding.

No torch.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, NamedTuple

from torchmem.lint.children import walk
from torchmem.lint.facts import key_of, target_keys
from torchmem.lint.knowledge import BACKWARD_CALLERS, last_name

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["SCALER_NAME", "Scalers", "calls_method", "disabled", "done_here", "function_text",
           "guarded", "is_autocast", "is_scaler_ctor", "scaler_evidence", "scalers",
           "scales_own_loss", "tensor_backward"]

_SCRATCH = "amp_scalers"
#: names a scaler handed in as a parameter goes by
SCALER_NAME = re.compile(r"^_*(grad_|amp_|loss_)?scaler$", re.IGNORECASE)
_AUTOCAST_TAILS = ("autocast",)


class Scalers(NamedTuple):
    """The scalers of one file.

    Attributes:
        keys: keys bound to an enabled (or possibly enabled) ``GradScaler``.
        disabled: keys bound only to ``GradScaler(enabled=False)``.
    """

    keys: frozenset[str]
    disabled: frozenset[str]


def is_scaler_ctor(node: ast.AST, ctx: Context) -> bool:
    """``GradScaler(...)`` under any import (``torch.amp``, ``torch.cuda.amp``, FSDP's
    ``ShardedGradScaler``, torch_xla's ``xamp.GradScaler``)."""
    if type(node) is not ast.Call:
        return False
    func = node.func  # type: ignore[attr-defined]
    qual = ctx.qualname(func)
    name = qual.rpartition(".")[2] if qual else (
        func.id if type(func) is ast.Name else getattr(func, "attr", ""))
    return name.endswith("GradScaler")


def disabled(call: ast.Call) -> bool:
    """``enabled=False`` given as a literal."""
    return any(kw.arg == "enabled" and isinstance(kw.value, ast.Constant)
               and kw.value.value is False for kw in call.keywords)


def _ctors(value: ast.AST, ctx: Context) -> list[ast.Call]:
    if type(value) is ast.IfExp:  # GradScaler() if amp else None
        return _ctors(value.body, ctx) + _ctors(value.orelse, ctx)  # type: ignore[attr-defined]
    return [value] if is_scaler_ctor(value, ctx) else []  # type: ignore[list-item]


def scalers(ctx: Context) -> Scalers:
    """The scalers of the file being linted (computed once per file)."""
    found = ctx.scratch.get(_SCRATCH)
    if found is not None:
        return found  # type: ignore[no-any-return]
    enabled: set[str] = set()
    off: set[str] = set()
    # a scaler is built by a call, or annotated, with a name ending in "GradScaler": a file
    # whose text never says it has none (most files: no walk)
    tree = ctx.tree if "GradScaler" in ctx.source else None
    for node in walk(tree) if tree is not None else ():
        t = type(node)
        if t is ast.Assign or t is ast.AnnAssign:
            value = node.value  # type: ignore[attr-defined]
            calls = _ctors(value, ctx) if value is not None else []
            if not calls:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [
                node.target]  # type: ignore[attr-defined]
            keys = [k for target in targets for k in target_keys(target)]
            (off if all(disabled(c) for c in calls) else enabled).update(keys)
        elif isinstance(node, ast.arg) and node.annotation is not None and \
                "GradScaler" in ast.unparse(node.annotation):
            enabled.add(node.arg)
    result = Scalers(frozenset(enabled), frozenset(off - enabled))
    ctx.scratch[_SCRATCH] = result
    return result


def function_text(ctx: Context) -> str:
    """The source of the current function (the whole file at module level)."""
    node = ctx.fn.node
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
        return "\n".join(ctx.lines()[node.lineno - 1:node.end_lineno])
    return ctx.source


def scaler_evidence(key: str, ctx: Context) -> str | None:
    """How we know ``key`` is an enabled ``GradScaler``: ``"built"`` (bound to one in this
    file, or an alias of such a key), ``"api"`` (named like a scaler and the current
    function also calls its ``update()``), else ``None``."""
    found = scalers(ctx)
    local = ctx.fn.facts.defs.get(key)
    if local:  # bound in this function: its own bindings decide
        for value in local:
            calls = _ctors(value, ctx)
            if calls and not all(disabled(c) for c in calls):
                return "built"
            if calls:
                return None
            alias = key_of(value)  # scaler = self.scaler
            if alias is not None and alias in found.keys:
                return "built"
    elif key in found.disabled:
        return None
    elif key in found.keys:
        return "built"
    if SCALER_NAME.match(last_name(key)) and calls_method(function_text(ctx), key, "update"):
        return "api"
    return None


def is_autocast(node: ast.AST, ctx: Context) -> bool:
    """``torch.autocast(...)``, ``torch.cuda.amp.autocast()``, ``autocast()`` imported from
    torch, not disabled by a literal ``enabled=False``."""
    if type(node) is not ast.Call:
        return False
    qual = ctx.qualname(node.func)  # type: ignore[attr-defined]
    if qual is None or not qual.startswith("torch.") or not qual.endswith(_AUTOCAST_TAILS):
        return False
    return not disabled(node)  # type: ignore[arg-type]


def tensor_backward(call: ast.Call) -> bool:
    """``<tensor>.backward(...)``: not a wrapper's ``accelerator.backward(loss)``,
    ``self.backward(loss)``, ``model_engine.backward(loss)``."""
    func = call.func
    if type(func) is not ast.Attribute or func.attr != "backward":
        return False
    recv = key_of(func.value)
    if recv is None:
        return True  # scaler.scale(loss).backward(), (a + b).backward(), losses[0].backward()
    name = last_name(recv)
    if name == "self" or name in BACKWARD_CALLERS:
        return False
    return not call.args or len(call.args) == 1 and not _loss_like(call.args[0])


def _loss_like(arg: ast.expr) -> bool:
    """``engine.backward(loss)``: an argument named like a loss is what a wrapper takes
    (a tensor's ``backward(gradient)`` takes a gradient)."""
    key = key_of(arg)
    return key is not None and "loss" in last_name(key).lower()


def guarded(call: ast.Call, key: str, ctx: Context) -> bool:
    """Whether ``call`` sits in a branch of an ``if`` whose test reads the scaler
    (``if self._scaler is not None: ... else: loss.backward()``): the code handles both
    the scaled and the unscaled case, the scaled one possibly through a helper."""
    name = last_name(key)
    line = call.lineno
    fn = ctx.fn.node
    stack: list[ast.AST] = list(getattr(fn, "body", ()))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if type(node) is ast.If and node.lineno < line <= (node.end_lineno or 0) and any(
                isinstance(sub, (ast.Name, ast.Attribute)) and last_name(key_of(sub) or "") == name
                for sub in walk(node.test)):  # type: ignore[attr-defined]
            return True
        if isinstance(node, ast.stmt):
            stack.extend(ast.iter_child_nodes(node))
    return False


def scales_own_loss(ctx: Context, name: str) -> bool:
    """Whether some ``K.scale(loss)`` of the file, ``K`` being the key ``name``, scales
    a loss computed where it is scaled (not a parameter of the function that scales it,
    as in a wrapper's ``def backward(self, loss): self.scaler.scale(loss).backward()``)."""
    cache: dict[str, bool] = ctx.scratch.setdefault("amp_own_loss", {})
    if name in cache:
        return cache[name]
    found = False
    stack: list[tuple[ast.AST, frozenset[str]]] = [(ctx.tree, frozenset())] if ctx.tree else []
    while stack and not found:
        node, params = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params = frozenset(p.arg for p in a.posonlyargs + a.args + a.kwonlyargs)
        elif type(node) is ast.Call and type(node.func) is ast.Attribute and \
                node.func.attr == "scale" and len(node.args) == 1 and \
                key_of(node.func.value) == name:  # type: ignore[attr-defined]
            root = node.args[0]  # type: ignore[attr-defined]
            while type(root) in (ast.Attribute, ast.Subscript):
                root = root.value  # type: ignore[attr-defined]
            found = not (type(root) is ast.Name and root.id in params)  # type: ignore[attr-defined]
        stack.extend((child, params) for child in ast.iter_child_nodes(node))
    cache[name] = found
    return found


def done_here(ctx: Context, key: str, method: str, region: ast.AST | None = None) -> bool:
    """Whether the current function (or ``region`` of it, a loop) calls
    ``<scaler>.<method>(`` (``scale``, ``update``), itself or through a function of this
    file that it calls by name (a ``scale_loss()`` helper, ``self._optimizer_step()``).
    Any receiver with the scaler's last name counts."""
    call = _method_call(last_name(key), method)
    if isinstance(region, ast.stmt) and region.end_lineno:
        here = "\n".join(ctx.lines()[region.lineno - 1:region.end_lineno])
    else:
        here = function_text(ctx)
    if call.search(here):
        return True
    cache: dict[str, frozenset[str]] = ctx.scratch.setdefault("amp_helpers", {})
    names = cache.get(call.pattern)
    if names is None:
        lines = ctx.lines()
        found = set()
        for node in walk(ctx.tree) if ctx.tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno \
                    and call.search("\n".join(lines[node.lineno - 1:node.end_lineno])):
                found.add(node.name)
        names = cache[call.pattern] = frozenset(found)
    return any(re.search(rf"(?<!\w){re.escape(name)}\(", here) for name in names)


def _method_call(receiver: str, method: str) -> re.Pattern[str]:
    """``receiver.method(`` where ``receiver`` is a whole name (``scaler``, ``self.scaler``;
    not ``myscaler``)."""
    return re.compile(rf"(?<!\w){re.escape(receiver)}\s*\.\s*{method}\(")


def calls_method(text: str, key: str, method: str) -> bool:
    """Whether ``text`` calls ``<key>.<method>(``."""
    return bool(_method_call(key, method).search(text))
