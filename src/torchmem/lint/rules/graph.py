"""TMM1xx: autograd graphs kept alive longer than one iteration.

A tensor computed with autograd recording on references its ``grad_fn`` and, through it,
the graph of the computation that produced it, with the activations saved for backward.
These rules find code that keeps such tensors (and so their graphs) beyond the iteration
that made them: accumulated losses and outputs, recurrent state fed back, evaluation run
with recording on, graphs retained on purpose and never used. They follow values through
each function's data flow: a value counts as graph-carrying when it comes from a model or
criterion call (or a tensor that requires grad) outside ``torch.no_grad()`` and no
``.item()``, ``.detach()``, ``float()`` or comparison intervenes.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import CONTAINER, GRAPH, LEAF, TENSOR, TYPED, VALUE
from torchmem.lint.registry import Rule, register
from torchmem.lint.repeats import time_loop
from torchmem.lint.rules._accumulations import (
    container as _container,
    graph_accumulation,
    maybe_called_step,
    never_differentiated,
    over_positions,
)
from torchmem.lint.rules._buffer_fold import buffer_fold
from torchmem.lint.rules._logged_loss import logged_loss
from torchmem.lint.rules._state_fold import state_fold
from torchmem.lint.rules._callee_stores import (
    accumulating_method,
    callee_store,
    is_plain_tensor,
)
from torchmem.lint.rules._common import (
    describe,
    is_forward_function,
    is_hook,
    per_call,
)
from torchmem.lint.rules._common import (
    fresh as _fresh,
)
from torchmem.lint.rules._common import (
    trains as _trains,
)
from torchmem.lint.rules._element_backward import differentiated_sibling, element_store
from torchmem.lint.rules._graph_advice import SIMPLE, advice, graph_part, known_tensor

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, FunctionState

__all__ = ["GraphAccumulation"]

@register
class GraphAccumulation(Rule):
    """Tensors that carry an autograd graph accumulated across loop iterations.

    What:
        Flags ``xs.append(loss)``, ``total += loss``, ``d[k] = out``,
        ``self.history.append(out)``, ``acc = torch.cat([acc, out])`` and a moving average
        (``ema = a * loss + (1 - a) * ema``, ``ema = ema * d + loss``) inside a training
        loop (its body calls ``backward()`` or an optimizer ``step()``), a loop over a data
        loader, or a ``training_step`` method, when the value comes from a model or
        criterion call, or from a tensor that requires grad, and no ``.item()``,
        ``.detach()`` or ``float()`` intervenes. The container must outlive the iteration:
        it is created before the loop, or is an attribute. The same goes for an item
        (``logs["loss"] = logs["loss"] + loss``, ``d.setdefault(k, []).append(loss)``) and
        for an in-place add (``total.add_(loss)``, ``stats.device_stat("loss").add_(loss)``).
        A training step that a loop of the file calls (it calls ``backward()`` itself:
        ``take_training_step(model, batch, stats)``) keeps into what it is given: its
        parameters and ``self``. In a file that never differentiates (no ``backward()``,
        no ``autograd.grad``), outputs collected with their graphs in a loop over steps or
        data (``range(n)``, ``while``, ``frames``) are flagged as well, whatever the loop;
        a running sum and a loop over a tensor's positions (``range(x.shape[1])``) are not.

        Also flags a call in such a loop that hands a graph-carrying value to a method of a
        class of the same file, or imported from another file of the tree, which keeps it
        on its object (``meter.update(loss)`` or ``self.meter.update(loss)`` where
        ``update`` does ``self.sum += val`` or ``self.sums[key] += val``, or folds it into
        an attribute from the attribute's old value: ``self.memory = m * self.memory +
        (1 - m) * x``, ``self.avg.add_(r * (x - self.avg))``); the object may be built in
        the function, at the script's top level (``trainer = Trainer(...)`` under
        ``if __name__ == "__main__":``) or be a model of the file whose own method
        returns the value (``model.compute_loss(out, y)``). A method that folds a graph
        it computes itself into such an attribute (``self._avg.add_(rate * (adv_sq -
        self._avg))`` after a forward pass) is flagged at that statement. A public
        method of a plain class (not an ``nn.Module``) that adds values computed from its tensor-annotated parameters to
        ``self.*`` (a metric's ``update(self, output: tuple[Tensor, Tensor])`` doing
        ``self._sum += F.cross_entropy(y_pred, y)``): called from a training loop with a
        loss or a model output, it keeps every call's graph. A callable given to
        ``__init__`` and annotated to return tensors
        (``update_function: Callable[..., tuple[Tensor, int]]``) counts as such an argument.

        Also flags a value kept in a container across a training loop whose body calls
        ``backward()`` on one of the container's elements (``losses.append(step_loss)``
        then ``losses[-1].backward()``): whatever the value's origin, it carries a graph;
        likewise an element of a tuple the loop binds and differentiates another element of
        (``losses = compute(batch)``, ``losses[0].backward()``), added into a running value
        (``ema = a * losses[1] + (1 - a) * ema``);
        and a forward hook (``layer.register_forward_hook(self.save)``) that appends its
        output argument to ``self.*`` or to a list of the enclosing function, keeping one
        graph per forward pass. In the ``forward`` of an ``nn.Module`` layer (with
        parameters of its own, deriving from a torch normalisation layer, or built by
        another module of the file), it flags a statistic of the input folded into a
        buffer (registered in the class or a base class of the file, or a torch
        normalisation layer's running statistics; an item of it too) with recording on, in an update that decays the buffer's old value
        (``self.running_mean.mul_(1 - m).add_(mean * m)``,
        ``self.running_var = (1 - m) * self.running_var + m * var``, or a helper of the
        file that updates its argument in place, ``self.avg = lerp(self.avg, x, d)``; no
        ``.detach()``):
        the buffer chains every call's graph onto its previous value. A function that
        returns the loss for backward as the first element of a tuple and, beside it, a
        dictionary of logged values holding that loss (``return loss, sample_size,
        logging_output`` with ``logging_output = {"loss": loss, ...}``), or a term the loss
        was summed from while the dictionary's other entries are detached
        (``metrics["nll_loss"] = nll_loss.cpu().mean()``), is flagged too: the logged copy
        is read as a number, and whoever keeps the logged values keeps the graphs.

    Why:
        A tensor produced by a forward pass references its ``grad_fn``, and through it the
        whole graph of that iteration: the nodes, and until ``backward()`` runs, every
        activation saved for backward. Keeping the tensor keeps that graph alive, so memory
        grows by one graph per iteration until the process runs out. ``total += loss``
        is worse: every addition extends a single graph that links all iterations.

    Known problems:
        Values are followed through the functions of the same file (a helper that
        returns the loss, ``self._step(batch)`` returning ``loss, pred``, a helper that
        calls ``backward()`` making the calling loop a training loop), and, in per-step
        loops, through the top-level functions and the classes imported from other files
        of the tree; other helpers of other files, and containers filled in another
        function, are not seen. A call whose result
        the linter cannot see into (``hvd.allreduce(val)``) is taken to pass the graph of
        its tensor arguments through when its result is kept on an object. For methods that
        accumulate their arguments, parameters annotated as tensors are assumed to carry a
        graph, except target-like names (``y``, ``labels``, ``target``); private methods
        (``_update``) are judged at their callers instead, and subclasses of
        ``torchmetrics.Metric`` (whose ``update`` runs without autograd) are skipped. A
        step output whose differentiated entry is replaced by a detached value
        (``output['loss'] = output['loss'].detach()``) is taken to hold no graph any more,
        although its other entries could. The fix
        (``.detach()``) is offered only where the value is known to be a tensor, not a
        tuple, dict or model output. A list that is
        summed into a loss later in the same function (``sum(losses).backward()``) is
        intentional and not flagged. Loops over tiles, chunks or prompts that collect
        outputs (and return them) are part of a computation, not a per-step loop, and are
        not flagged. A forward hook cannot know its caller's grad mode: a hook that
        collects features only under ``torch.no_grad()`` is reported too (detaching there
        is free). In a hook, a container the hook creates itself (the tuple it returns)
        is not kept, and a keyed store (``self.hidden[device] = output``) overwrites the
        previous call's entry: it is reported only when its key is a counter the file
        increments, ``len(...)`` or ``next(...)``. ``buf[i] = out`` into a tensor under
        ``torch.no_grad()`` copies the data and is not reported. Python's builtins
        (``zip``, ``tuple``) never count as a model, even when their result reaches
        ``backward()``. ``x = self.transform(x)``, with a callable given to ``__init__``, is
        taken to pass ``x``'s graph through. For a logged loss, the returned loss counts
        as graph-carrying also when it is the result of a function out of sight given
        graph-carrying tensors (``modules.cross_entropy(logits.view(-1, v), targets)``);
        a value detached on one branch (``loss if tpu else loss.data``) is a choice and is
        not reported, nor a term of the loss in a dictionary none of whose entries is
        detached (the caller may weight and differentiate it).

    Example:
        ```python
        losses = []
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss)
        ```

    Use instead:
        ```python
        losses = []
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())  # or loss.detach() to keep a tensor
        ```
    """

    code = "TMM101"
    name = "graph-accumulation"
    summary = "tensor with autograd graph accumulated across loop iterations"
    fix_title = "Detach the value before keeping it"
    fix_safety = "unsafe"

    def _check_element(self, node: ast.AST, ctx: Context) -> None:
        """``losses.append(v)`` in a loop that calls ``losses[-1].backward()``."""
        found = element_store(node, ctx)
        if found is None or ctx.kind(found.value) & (GRAPH | LEAF | TENSOR) == TENSOR:
            return  # a tensor known to hold no history (v.detach())
        v = describe(found.value)
        kept = "is kept in" if found.how == "append" else "is stored in"
        ctx.report(self, found.value, (
            f"'{v}' {kept} '{found.key}', an element of which this loop differentiates "
            f"(line {found.call.lineno}), so it carries an autograd graph; '{found.key}' "
            f"outlives each iteration of the training loop: every iteration's graph stays "
            f"alive; keep a detached copy (.detach(), or .item() for a scalar) and "
            f"differentiate the fresh value"))

    def _check(self, node: ast.AST, ctx: Context) -> None:
        found = graph_accumulation(node, ctx)
        if found is None:
            if ctx.loops and type(node) is not ast.AugAssign:
                self._check_element(node, ctx)
            return
        acc, loops, step_fn = found
        fn = ctx.fn
        training = any(_trains(lp, ctx) for lp in loops)
        if is_forward_function(fn, ctx) and not training and not is_hook(ctx):
            return
        if not training:
            if fn.is_eval() or any(lp.eval_loader for lp in loops):
                return  # TMM103 reports evaluation code
            # outside training, only a loop over batches is a per-step loop: elsewhere
            # (tiles, chunks, prompts) collecting outputs is usually the computation itself
            # ... except a file that never differentiates, collecting outputs with their
            # graphs over steps or data (a running sum may be an episode's return, summed
            # for a backward the adapted code left out)
            if not step_fn and not any(lp.loader for lp in loops) and not (
                    acc.how != "add" and never_differentiated(ctx) and
                    any(time_loop(lp.node) and not over_positions(lp.node) for lp in loops)):
                return
            if acc.how == "store" and ctx.kind(_container(node)) & VALUE:
                return  # buf[i] = out copies into a tensor
        if not _fresh(acc.value, loops):
            return
        v = describe(acc.value)
        where = "training loop" if training else "loop"
        verb = {"append": f"is kept in '{acc.key}'", "add": f"is added into '{acc.key}'",
                "store": f"is stored in '{acc.key}'", "concat": f"is concatenated into '{acc.key}'"
                }[acc.how]
        span = "each call of this training step" if step_fn and not loops else \
            f"each iteration of the {where}"
        if is_hook(ctx) and not loops:
            span = "each forward pass that calls this hook"
        part = graph_part(acc.value, ctx)
        msg = (f"'{v}' carries an autograd graph and {verb}, which outlives {span}: every "
               f"iteration's graph stays alive; {advice(acc.how, part, ctx)}")
        sibling = None if ctx.kind(acc.value) & GRAPH else differentiated_sibling(acc.value, ctx)
        if sibling is not None:
            part, call = sibling
            e = describe(part)
            msg = (f"'{e}' is an element of '{describe(part.value)}', an element of which this "
                   f"loop differentiates (line {call.lineno}), so it carries an autograd "
                   f"graph; '{v}' {verb}, which outlives {span}: every iteration's graph "
                   f"stays alive; add {e}.item() (or {e}.detach())")
        fix = None
        if type(part) in SIMPLE and known_tensor(part, ctx):
            # only where the value is known to be a tensor: .detach() of a tuple, a dict
            # or a batch object's int attribute would raise
            line, col, end_line, end_col = ctx.span(part)
            fix = [ctx.edit((end_line, end_col), (end_line, end_col), ".detach()")]
        ctx.report(self, acc.value, msg, fix)

    def _check_callee(self, node: ast.Call, ctx: Context) -> None:
        """``meter.update(loss)`` where the method keeps its argument on its object."""
        found = callee_store(node, ctx)
        if found is None:
            return
        step_fn = per_call(ctx)
        training = any(_trains(lp, ctx) for lp in found.loops)
        if not training and not step_fn and not any(lp.loader for lp in found.loops):
            return
        if not training and (ctx.fn.is_eval() or any(lp.eval_loader for lp in found.loops)):
            return  # TMM103 reports evaluation code
        if not found.loops and not step_fn:
            return
        arg = found.arg
        v = describe(arg)
        w = v if type(arg) in SIMPLE else f"({v})"  # (loss * 1000).detach()
        at = f"{found.summary.where}:{found.line}" if found.summary.where else \
            f"line {found.line}"
        where = "training loop" if training else "loop"
        span = "each call of this training step" if step_fn and not found.loops else \
            f"each iteration of the {where}"
        msg = (f"'{v}' carries an autograd graph and is passed to {found.summary.name}(), "
               f"which keeps it in '{found.container}' ({at}), on an object that "
               f"outlives {span}: every iteration's graph stays alive; "
               f"pass {w}.detach() (or {w}.item() for a scalar)"
               if is_plain_tensor(arg, ctx) else
               f"'{v}' carries an autograd graph and is passed to {found.summary.name}(), "
               f"which keeps it in '{found.container}' ({at}), on an object that "
               f"outlives {span}: every iteration's graph stays alive; pass detached copies "
               f"of its tensors")
        fix = None
        if type(arg) in SIMPLE and is_plain_tensor(arg, ctx):
            _, _, end_line, end_col = ctx.span(arg)
            fix = [ctx.edit((end_line, end_col), (end_line, end_col), ".detach()")]
        ctx.report(self, node, msg, fix)

    def _check_buffer(self, node: ast.AST, ctx: Context) -> None:
        found = buffer_fold(node, ctx)
        if found is not None:
            name, value = found
            ctx.report(self, value, (
                f"'{describe(value)}' is computed from the input of forward() with autograd "
                f"on and folded into the buffer 'self.{name}', which lives as long as the "
                f"module: each call chains its graph onto the buffer's previous value; fold "
                f"a detached value (.detach()) or update the buffer under torch.no_grad()"))

    def _check_fold(self, node: ast.AST, ctx: Context, before: int) -> None:
        """A graph a method computes folded into its object's state (``_state_fold``),
        unless this statement was reported already (``self.ema = 0.9 * self.ema + loss`` in
        a training step is a running total :meth:`_check` reports)."""
        if any(v.code == self.code for v in ctx.violations[before:]):
            return
        found = state_fold(node, ctx)
        if found is not None:
            name, value = found
            ctx.report(self, value, (
                f"'{describe(value)}' carries an autograd graph computed in "
                f"{ctx.fn.name}() and is folded into 'self.{name}' together with its "  # type: ignore[union-attr]
                f"previous value: each call chains its graph onto the attribute, which "
                f"lives as long as the object, so every call's graph stays alive; fold a "
                f"detached value (.detach()) or update 'self.{name}' under torch.no_grad()"))

    def visit_Return(self, node: ast.Return, ctx: Context) -> None:
        for value, loss, logs in logged_loss(node, ctx):
            v = describe(value)
            what = (f"'{v}', which this function returns for backward, is also" if v == loss
                    else f"'{v}' carries the autograd graph of '{loss}', which this function "
                         f"returns for backward, and is")
            ctx.report(self, value, (
                f"{what} kept in '{logs}', the dictionary of logged values returned beside "
                f"it: whoever keeps the logged values (a trainer's logging outputs, a "
                f"metrics store averaged at each log step) keeps every step's graph with "
                f"them; log a detached value (.detach(), or .item() for a scalar)"))

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        before = len(ctx.violations)
        self._check_buffer(node, ctx)
        if type(node.func) is ast.Attribute and (ctx.loops or per_call(ctx)):
            self._check(node, ctx)
            self._check_callee(node, ctx)
        elif type(node.func) is ast.Attribute and maybe_called_step(node, ctx):
            self._check(node, ctx)
        self._check_fold(node, ctx, before)

    def enter_function(self, state: FunctionState, ctx: Context) -> None:
        """A method that accumulates its tensor arguments on its object (a metric's
        ``update(self, output: tuple[Tensor, Tensor])`` doing ``self._sum += loss``)."""
        for value, kind, container in accumulating_method(state, ctx):
            v = describe(value)
            if type(value) not in SIMPLE:
                v = f"({v})"
            tensor = bool(kind & TYPED) and not kind & CONTAINER
            how = (f"keep {v}.detach()" if tensor else
                   f"keep detached copies of the tensors in {v}")
            msg = (f"'{describe(value)}' is computed from the tensors {state.name}() "
                   f"receives (tensor-annotated arguments, or callables given to __init__ "
                   f"annotated to return tensors) and kept in '{container}', which lives as "
                   f"long as the "
                   f"object: when {state.name}() is called with tensors that carry an autograd "
                   f"graph (a loss or model output during training), every call's graph stays "
                   f"alive; {how}")
            fix = None
            if tensor and type(value) in SIMPLE:
                _, _, end_line, end_col = ctx.span(value)
                fix = [ctx.edit((end_line, end_col), (end_line, end_col), ".detach()")]
            ctx.report(self, value, msg, fix)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        before = len(ctx.violations)
        self._check_buffer(node, ctx)
        if ctx.loops or per_call(ctx) or maybe_called_step(node, ctx):
            self._check(node, ctx)
        self._check_fold(node, ctx, before)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        before = len(ctx.violations)
        self._check_buffer(node, ctx)
        if ctx.loops or per_call(ctx) or maybe_called_step(node, ctx):
            self._check(node, ctx)
        self._check_fold(node, ctx, before)
