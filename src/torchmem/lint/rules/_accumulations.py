"""Which accumulations of ``TMM101`` outlive a step (no torch).

:func:`graph_accumulation` decides whether a statement keeps a graph-carrying value in a
container that lives beyond one iteration: in a loop, the container must be created before
it (or be an attribute); in a per-step method (``training_step``, a forward hook) it must
be an attribute or a closure's; in a training step that a loop of the file calls (it runs
``backward()`` itself: ``take_training_step(model, batch, stats)``), it may also be an
object the step is given. :func:`never_differentiated` and :func:`over_positions` qualify
loops that are not training loops: a file that never differentiates keeps its graphs for
nothing, except where a loop computes one result in pieces.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import CONTAINER, GRAPH, LEAF, TENSOR, TYPED
from torchmem.lint.repeats import repeated
from torchmem.lint.rules._common import (
    Accumulation,
    accumulation,
    is_hook,
    outer_container,
    per_call,
)
from torchmem.lint.rules._element_backward import differentiated_sibling
from torchmem.lint.store_keys import varying_key

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, FunctionState, LoopState

__all__ = ["graph_accumulation", "maybe_called_step", "never_differentiated", "over_positions",
           "container"]


def graph_accumulation(node: ast.AST, ctx: Context) -> tuple[Accumulation, list[LoopState],
                                                              bool] | None:
    """An accumulation of a graph-carrying value into a container that outlives the
    iteration: returns it, the loops it persists across, and whether the function is a
    per-step hook (``training_step``)."""
    if ctx.fn is None:
        return None
    step_fn = per_call(ctx)
    called_step = not step_fn and not ctx.loops and _called_step(ctx)
    step_fn = step_fn or called_step
    if not ctx.loops and not step_fn:
        return None
    acc = accumulation(node, ctx)
    if acc is None:
        return None
    if not ctx.kind(acc.value) & GRAPH and (ctx.no_grad or acc.how != "add" or
                                            differentiated_sibling(acc.value, ctx) is None):
        return None
    if is_hook(ctx) and not outer_container(acc.key, ctx.fn):
        return None  # a container the hook makes anew each call (the tuple it returns)
    if is_hook(ctx) and acc.how == "store" and not varying_key(node, ctx):
        return None  # self.hidden[device] = output: overwrites the last call's entry
    if acc.how == "store" and ctx.no_grad and _tensor_target(node, ctx):
        return None  # stats[i] = loss under no_grad: a copy of the data, no graph
    loops = ctx.persistent_loops(acc.key)
    if loops and _one_optimizer_step(loops, ctx):
        return None  # summed over the sub-steps of one optimizer step, reset at the next
    if not loops and not (step_fn and (acc.key.startswith("self.") or is_hook(ctx) and
                                       outer_container(acc.key, ctx.fn))) and \
            not (called_step and _given(acc.key, ctx.fn)):
        return None
    facts = ctx.fn.facts
    if acc.key in facts.backward_names():
        return None  # the container is summed into a loss: keeping the graph is the point
    return acc, loops, step_fn


def _one_optimizer_step(loops: list[LoopState], ctx: Context) -> bool:
    """Whether the loops a value persists across are the gradient-accumulation sub-steps
    of one optimizer step: none of them steps an optimizer, and the loop around them, which
    binds the value afresh on each of its iterations, does (``for i_iter in ...: total = 0;
    for sub in range(iter_size): ...backward(); total += loss / iter_size`` then
    ``optimizer.step()``). The value then holds at most one step's sub-batches, whose saved
    activations their ``backward()`` freed."""
    outer = len(ctx.loops) - len(loops) - 1
    if outer < 0 or any(lp.facts.step for lp in loops) or not any(
            lp.facts.backward for lp in loops):
        return False
    return ctx.loops[outer].facts.step


def _called_step(ctx: Context) -> bool:
    """Whether the current function is a training step that a loop of the file calls again
    and again (``take_training_step(args, model, batch, stats)`` in the step loop): it
    calls ``backward()`` itself."""
    fn = ctx.fn
    if fn is None or not fn.facts.has_backward or type(fn.node) is ast.Module:
        return False
    memo = ctx.scratch.setdefault("TMM101.called_step", {})
    found = memo.get(id(fn.node))
    if found is None:
        # cheap first test: the file calls the name somewhere besides its definition
        names = ctx.scratch.get("TMM101.call_names")
        if names is None:
            names = ctx.scratch["TMM101.call_names"] = Counter(_CALLED.findall(ctx.source))
        called = names[fn.name] > 1
        found = memo[id(fn.node)] = called and id(fn.node) in repeated(ctx)
    return found  # type: ignore[no-any-return]


_CALLED = re.compile(r"\b(\w+)\s*\(")
_DIFFERENTIATES = re.compile(r"\.backward\s*\(|autograd\.(grad|backward)\s*\(|\bgrad\s*\(")


def never_differentiated(ctx: Context) -> bool:
    """Whether nothing in the file differentiates (no ``backward()``, no
    ``torch.autograd.grad``): a graph kept there is never used."""
    memo = ctx.scratch.get("TMM101.never_differentiated")
    if memo is None:
        memo = ctx.scratch["TMM101.never_differentiated"] = \
            _DIFFERENTIATES.search(ctx.source) is None
    return memo  # type: ignore[no-any-return]


def over_positions(loop: ast.AST) -> bool:
    """Whether ``loop`` goes over the positions of a tensor's dimension
    (``range(x.shape[1])``, ``range(x.size(0))``, ``range(len(x))``): one result computed in
    pieces (an RNN unrolled by hand), whose pieces are then joined."""
    it = getattr(loop, "iter", None)
    if type(it) is not ast.Call or getattr(it.func, "id", "") != "range":
        return False
    return any(type(n) is ast.Attribute and n.attr == "shape" or type(n) is ast.Call and (
        getattr(n.func, "attr", "") == "size" or getattr(n.func, "id", "") == "len")
        for a in it.args for n in ast.walk(a))


def maybe_called_step(node: ast.AST, ctx: Context) -> bool:
    """:func:`_called_step`, asked only for a statement that accumulates, in a function
    that differentiates (the cheap tests first)."""
    fn = ctx.fn
    return fn is not None and fn.facts.has_backward and \
        accumulation(node, ctx) is not None and _called_step(ctx)


def _given(key: str, fn: FunctionState) -> bool:
    """Whether ``key`` is reached from a parameter of ``fn`` that it never rebinds: the
    caller's object, which outlives the call."""
    root = key.partition(".")[0].partition("[")[0]
    return root in fn.facts.params and root not in fn.facts.assigned and root != "self"


def _tensor_target(node: ast.AST, ctx: Context) -> bool:
    """Whether ``node`` (``buf[i] = v``) stores into a value known to be a tensor (not a
    list or dict, which would keep ``v`` itself)."""
    kind = ctx.kind(container(node))
    return bool(kind & (GRAPH | LEAF | TENSOR | TYPED)) and not kind & CONTAINER


def container(node: ast.AST) -> ast.AST:
    """The container expression of a ``d[k] = v`` statement (or the node itself)."""
    if type(node) is ast.Assign and type(node.targets[0]) is ast.Subscript:
        return node.targets[0].value
    return node
