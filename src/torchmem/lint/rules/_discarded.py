"""Forward passes whose graph the function itself throws away (no torch).

``tfX = self(tX); fX.append(tfX.detach().cpu().numpy())`` in ``slide()``,
``out = model(image, mask); res = out[0].permute(1, 2, 0).detach().cpu().numpy()`` in a
server's ``run()``: each forward pass records a graph and saves activations, and the only
things the function does with the output drop the graph (``.detach()``, ``.numpy()``,
``.tolist()``, ``.item()``, ``.data``, ``float()``, or a helper of the file that does so:
:mod:`torchmem.lint.rules._fates`). Such a forward pass is reported whatever else the
function does: when every forward pass of a function that never differentiates is like
that, the function is inference code; in a function that differentiates other values
(``self.create_grid(self.gen(fixed_z), files)`` in a GAN's training loop,
``target_net(next_obs).max(1)[0].detach()`` in a DQN update) or keeps other outputs, that
one forward pass records a graph nobody can use.

Healthy code with the same shape is left alone: a forward pass whose output (or a value
computed from it) is returned, yielded, stored on an object, appended, differentiated or
given to a helper whose result is kept (its caller may differentiate it); a function that
asks for input gradients (``requires_grad_()``, ``.grad``, ``retain_grad()``: saliency,
attacks, attributions); a module's own ``forward``; code run under ``no_grad`` by a
decorator or by its callers.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from torchmem.lint.callers import mentions_no_grad
from torchmem.lint.children import walk as walk_nodes
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import (
    NO_GRAD_CONTEXTS,
    is_constructor_name,
    is_model_name,
    is_no_grad_decorator,
)
from torchmem.lint.rules._base_hooks import base_hook
from torchmem.lint.rules._common import describe
from torchmem.lint.rules._fates import DROPPED, walker
from torchmem.lint.step_calls import runs_backward

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["message", "note_forward", "thrown_away"]

#: scratch key: function id -> the forward passes run outside no_grad
_FORWARDS = "TMM103.forwards"
#: scratch key: the functions of the file called at least once under no_grad
_QUIET = "TMM103.no_grad_callees"
#: scratch key: the names the file handles as modules with weights
_MODULES = "TMM103.file_modules"
_MODE_SWITCH = re.compile(r"\.(train|eval)\(\s*\)")
_LOADED = re.compile(r"\.(load_state_dict)\(")
#: first characters of a dotted name written before a call (``self.gen`` of ``self.gen.eval()``)
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
#: what a function that needs input gradients mentions
_GRAD_ATTRS = frozenset({"requires_grad_", "retain_grad", "grad", "register_hook"})
#: what :func:`thrown_away` found: every forward pass of a function that does not
#: differentiate thrown away, one of them, or one in a function that differentiates
_EVERY, _SOME, _TRAINS = 0, 1, 2


def note_forward(call: ast.Call, ctx: Context) -> None:
    """Record ``call`` when it runs, outside ``no_grad``, a module known by name to have
    weights (``model(x)``, ``self.encoder(x)``, ``self(x)`` in a module), for
    :func:`thrown_away`. ``Model(envs)`` of a parameter named like a class builds an object;
    ``self.drop(ones)`` of a module not named like a model records no graph worth a
    finding. ``self.gen(z)`` counts when the file handles ``self.gen`` as a module with
    weights (:func:`_file_modules`)."""
    func = call.func
    if type(func) is ast.Attribute and func.attr == "forward":
        func = func.value
    if _weighted(call, ctx) and ctx.flow.is_forward(call, strict=True) or \
            type(func) is not ast.Name and key_of(func) in _file_modules(ctx):
        ctx.scratch.setdefault(_FORWARDS, {}).setdefault(id(ctx.fn.node), []).append(call)


def thrown_away(ctx: Context) -> tuple[ast.Call, int] | None:
    """The first forward pass of the current function, run outside ``no_grad``, whose
    graph the function throws away itself (or a helper of the file it hands the output
    to), and what the function does besides (see ``_EVERY``); ``None`` when there is
    none."""
    calls = ctx.scratch.get(_FORWARDS, {}).pop(id(ctx.fn.node), None)
    fn = ctx.fn
    node = fn.node
    if not calls or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            node.name in ("forward", "__call__") or node.name.startswith("test_"):
        return None  # a pytest test: one small forward pass, never worth a no_grad
    walk = walker(node, ctx)
    body = walk.body
    if _wants_grad(body) or base_hook(ctx) or \
            ("self" if fn.class_name else None, node.name) in _no_grad_callees(ctx):
        return None
    facts = fn.facts
    trains = bool(facts.has_backward or facts.has_step or facts.grad_calls) or \
        _calls_backward(body, ctx)
    fates = [(walk.start(call), call) for call in calls]
    dropped = [call for fate, call in fates if fate == DROPPED]
    if dropped:  # one bug, one finding: a state TMM102 reports as carried is left to it
        carried = {v.line for v in ctx.violations if v.code == "TMM102"}
        dropped = [call for call in dropped if not any(
            call.lineno <= line <= (call.end_lineno or call.lineno) for line in carried)]
    if not dropped:
        return None
    first = min(dropped, key=lambda c: (c.lineno, c.col_offset))
    if trains:
        return first, _TRAINS
    return first, _EVERY if len(dropped) == len(fates) else _SOME


def message(call: ast.Call, name: str, kind: int) -> str:
    """The finding's text for :func:`thrown_away`'s answer."""
    where = (f"in {name}() whose every forward pass has its output detached or copied to "
             f"the host and which never differentiates" if kind == _EVERY else
             f"in {name}(){', which differentiates other values,' if kind == _TRAINS else ','}"
             f" its output is only detached or copied to the host (here or by a helper it "
             f"is handed to)")
    return (f"forward pass {describe(call.func)}() outside torch.no_grad(), {where}: "
            f"autograd records a graph and saves activations that nothing uses; run it "
            f"under torch.no_grad() or torch.inference_mode()")


def _weighted(call: ast.Call, ctx: Context) -> bool:
    """Whether ``call`` runs a module named like one with weights (see ``has_weights``)."""
    func = call.func
    if type(func) is ast.Name:
        if func.id == "self":
            return ctx.in_module_class
        return not is_constructor_name(func.id) and is_model_name(func.id)
    if type(func) is not ast.Attribute:
        return False
    if is_model_name(func.attr):
        return True
    func = func.value  # model.decode(x), self.net.forward(x)
    name = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute \
        else None
    return name is not None and is_model_name(name)


def _file_modules(ctx: Context) -> frozenset[str]:
    """The names and attributes (``"self.gen"``) that the file handles as modules with
    weights, whatever their name: it loads a state dict into them, or switches them both to
    training and to eval mode (``.train()`` and ``.eval()``). (Asking for their
    ``.parameters()`` is not enough: frameworks' module containers hand out the
    parameters of detectors and heads that their evaluation hooks run under
    ``no_grad``.) Read from the source text, once per file."""
    memo = ctx.scratch.get(_MODULES)
    if memo is not None:
        return memo
    source = ctx.source or ""
    found = {key for key, _ in _receivers(_LOADED, source)}
    modes: dict[str, set[str]] = {}
    for key, mode in _receivers(_MODE_SWITCH, source):
        modes.setdefault(key, set()).add(mode)
    found.update(k for k, m in modes.items() if len(m) == 2)
    memo = ctx.scratch[_MODULES] = frozenset(found)
    return memo


def _receivers(call: re.Pattern[str], source: str) -> list[tuple[str, str]]:
    """``(name, method)`` for each ``name.method(...)`` that ``call`` finds in ``source``,
    where ``name`` is the whole dotted name written before it (starting with a letter or an
    underscore). The pattern anchors on the call, and the name is read backwards from it: a
    pattern that looks for the name first tries every word of the file."""
    found = []
    for match in call.finditer(source):
        end = start = match.start()
        while start and (source[start - 1].isalnum() or source[start - 1] in "_."):
            start -= 1
        if start < end and source[start] in _NAME_START:
            found.append((source[start:end], match.group(1)))
    return found


def _no_grad_callees(ctx: Context) -> set[tuple[str | None, str]]:
    """The functions (``(None, name)``) and methods (``("self", name)``) of the file that a
    call inside a ``no_grad`` block, or in a function decorated so, runs: their author runs
    them without recording where it matters, the other calls may want the graph."""
    memo = ctx.scratch.get(_QUIET)
    if memo is not None:
        return memo
    memo = ctx.scratch[_QUIET] = set()
    tree = ctx.tree
    if tree is None or not mentions_no_grad(ctx.source):
        return memo

    def name(expr: ast.expr) -> str | None:
        return ctx.qualname(expr.func if type(expr) is ast.Call else expr)  # type: ignore[attr-defined]

    for node in walk_nodes(tree):
        if type(node) in (ast.With, ast.AsyncWith):
            quiet: list[ast.AST] = node.body if any(  # type: ignore[attr-defined]
                name(i.context_expr) in NO_GRAD_CONTEXTS for i in node.items) else []  # type: ignore[attr-defined]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            quiet = node.body if any(is_no_grad_decorator(name(d))
                                     for d in node.decorator_list) else []
        else:
            continue
        for sub in (n for stmt in quiet for n in walk_nodes(stmt)):
            if type(sub) is ast.Call:
                func = sub.func
                if type(func) is ast.Name:
                    memo.add((None, func.id))
                elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                        func.value.id == "self":
                    memo.add(("self", func.attr))
    return memo


def _wants_grad(body: list[ast.AST]) -> bool:
    """Whether the function asks for gradients of its inputs (or hooks them)."""
    for node in body:
        if type(node) is ast.Attribute and node.attr in _GRAD_ATTRS:
            return True
        if type(node) is ast.keyword and node.arg == "requires_grad":
            return True
    return False


def _calls_backward(body: list[ast.AST], ctx: Context) -> bool:
    """Whether a function of the file called here runs ``backward()``."""
    summaries = ctx.summaries
    if summaries is None:
        return False
    for node in body:
        if type(node) is ast.Call:
            callee = summaries.resolve(node.func, ctx.flow)
            if callee is not None and runs_backward(summaries, callee.node):
                return True
    return False
