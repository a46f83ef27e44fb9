"""TMM103: evaluation and inference code that runs forward passes with autograd recording.

Part of the TMM1xx family (autograd graphs kept alive): evaluation code is found by the
function as a whole (named like ``evaluate``, calling ``model.eval()`` and never
``backward()``, looping over an eval loader), by the code after ``model.eval()`` in a
function that also trains, through the functions of the same file it calls, and by
forward passes whose outputs the function only detaches or copies to the host.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import GRAPH, VALUE
from torchmem.lint.registry import Rule, register
from torchmem.lint.step_calls import runs_backward
from torchmem.lint.rules._common import accumulation, describe
from torchmem.lint.rules._common import fresh as _fresh
from torchmem.lint.rules._common import trains as _trains
from torchmem.lint.rules._discarded import message, note_forward, thrown_away
from torchmem.lint.rules._eval_attrs import eval_only_attr
from torchmem.lint.rules._eval_once import found_in, note_call_site, note_finding, settle
from torchmem.lint.rules._eval_shapes import (abstract_eval_method, branch_end, by_callers_only,
                                               forwarding_closure, has_weights,
                                               inference_method, returns_value)
from torchmem.lint.rules._flag_switch import flag_eval

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, FunctionState, LoopState

__all__ = ["EvalWithoutNoGrad"]

#: scratch key: function id -> loop depth at its ``model.eval()``
_EVAL_MODE = "TMM103.eval_mode"
#: scratch key: function id -> (loop depth, first line, last line) of a ``model.eval()``
#: under an ``if``, valid to the end of that branch
_EVAL_BLOCK = "TMM103.eval_block"
#: scratch key: ids of the functions whose straight-line forward pass was reported
_STRAIGHT = "TMM103.straight"


@register
class EvalWithoutNoGrad(Rule):
    """Evaluation or inference loops that run forward passes with autograd recording.

    What:
        Flags a forward pass (``model(x)``) inside a loop of evaluation code that is not
        under ``torch.no_grad()`` / ``torch.inference_mode()``. Evaluation code is a
        function named like ``evaluate``/``validate``/``predict``/``infer``/``generate``,
        or one that calls ``model.eval()``, or a loop over a ``val_loader``/``test_loader``,
        with no
        ``backward()`` or optimizer ``step()`` in the function. In a function that also
        trains, the loops after ``model.eval()`` (and before ``model.train()``) that do not
        train are evaluation code too, and so are those later in the same branch when
        ``model.eval()`` runs under an ``if`` (validation every few epochs). A call to a function of the same file that runs a
        forward pass and no ``backward()`` counts as a forward pass
        (``self._eval_step(batch)`` in the loop, ``run_epoch(valid_data, model)`` after
        ``model.eval()``; a top-level function imported from another file of the tree is
        read for such calls too); after ``model.eval()``, so does ``self.infer(x)`` /
        ``self.predict(x)`` when the method is defined out of sight (a base class of
        another file), and so does ``model.predict_step(batch)`` (the step methods of
        Lightning's API run the model's forward pass). A function or method every call of
        which in the same file is evaluation code (after ``model.eval()`` outside
        ``no_grad`` in a caller that never trains, or from such a function) is evaluation
        code too, whatever its name; there only forward passes of a module known to have
        weights count. When the loop keeps the outputs (``preds.append(out)``), the
        finding points at that line.

        Outside loops it flags: the first forward pass after ``model.eval()`` of a module
        known to have weights (named like a model, or loaded with ``load_state_dict``) in
        a function that neither differentiates nor returns a value (a one-shot inference
        script); a
        forward pass of ``self.X`` in a plain class (not an ``nn.Module``) whose
        ``__init__`` puts ``self.X`` in eval mode and that never calls ``self.X.train()``
        (a scorer or a feature extractor); in a loop of a function that trains or evaluates
        by a flag parameter (``.eval()`` in the false branch of ``if is_train:``, every
        ``backward()``/``step()`` under ``if is_train:``; or ``if phase == "train":`` with
        ``phase`` a parameter or the variable of ``for phase in ["train", "val"]:``), the
        first forward pass of a model outside ``if is_train:``; and, in evaluation code, a call given a nested
        function that runs forward passes (a decoding ``step()`` handed to a beam search).

        Inference code is also found by what it does with its outputs: a function whose
        every forward pass (of a module named like a model, or ``self(x)`` in a module)
        has its output (or what is computed from it) only detached or
        copied to the host (``.detach()``, ``.numpy()``, ``.tolist()``, ``.item()``,
        ``.argmax()``, ``float()``), never returned, stored or handed to a helper whose
        result is kept, in a function that never differentiates (no ``backward()``,
        ``step()``, ``autograd.grad``, input gradients, or a function of the file that
        runs ``backward()``), that is not a module's ``forward`` and that no call in the
        file runs under ``no_grad``: its first forward pass is flagged (``slide()``,
        ``encode_sentences()``, a server's ``run()``). One such forward pass is flagged
        also in a function that differentiates other values or keeps other outputs
        (``self.create_grid(self.gen(fixed_z), files)`` in a GAN's training loop, a
        target network's ``.detach()``-ed output in a DQN update); a helper of the file
        that only detaches its argument drops its graph, and ``self.gen`` switched to both
        ``.train()`` and ``.eval()`` in the file is a module with weights. A forward pass of a sub-module named
        like a model (``self.asr.model.encoder(x)``) of a module that ``__init__`` put in
        eval mode counts like one of the module itself; and after ``model.eval()``, a call
        ``self.evaluate(...)`` of a stub of the file (``pass``, ``...``,
        ``raise NotImplementedError``) named like evaluation counts as a forward pass, as
        for a method defined out of sight.

    Why:
        ``model.eval()`` switches dropout and batch-norm behaviour; it does not stop
        autograd. Every forward pass still records a graph and saves its activations for a
        backward pass that never comes: the peak memory of evaluation is several times what
        it needs, and outputs kept in a list keep every batch's graph alive.

    Known problems:
        Functions that a framework already runs under ``no_grad`` are recognised only for
        Lightning's ``validation_step``/``test_step``/``predict_step``. A function whose
        every call in the same file is made under ``no_grad`` (or from a function that
        is) is taken to run under ``no_grad``; one called from other files, or passed as
        a callback, is judged on its own (add ``@torch.no_grad()`` to it, which is
        harmless). Decorators named like ``no_grad``/``inference_mode`` (a project's
        ``@smart_inference_mode()``) count as ``no_grad``. A function that returns the
        output of a forward pass after ``model.eval()`` is left alone: its caller may
        differentiate it (input gradients of a model in eval mode).

    Example:
        ```python
        def evaluate(model, val_loader):
            model.eval()
            preds = []
            for x, _ in val_loader:
                preds.append(model(x))
            return torch.cat(preds)
        ```

    Use instead:
        ```python
        @torch.inference_mode()
        def evaluate(model, val_loader):
            model.eval()
            preds = []
            for x, _ in val_loader:
                preds.append(model(x))
            return torch.cat(preds)
        ```
    """

    code = "TMM103"
    name = "eval-without-no-grad"
    summary = "evaluation loop runs forward passes outside torch.no_grad()"

    def _eval_context(self, ctx: Context) -> bool:
        """Evaluation code judged by the function as a whole: named like ``evaluate``, or
        calling ``model.eval()`` and never ``backward()``, or a loop over an eval loader."""
        fn = ctx.fn
        if ctx.no_grad or fn.facts.has_backward or fn.facts.has_step or fn.facts.grad_calls:
            return False
        if not (fn.is_eval() or any(lp.eval_loader for lp in ctx.loops)):
            return False
        # a loop that trains through a helper (train_one_batch(...)) is not evaluation
        return not any(_trains(lp, ctx) for lp in ctx.loops)

    def _eval_mode(self, ctx: Context, node: ast.AST | None = None) -> bool:
        """After ``model.eval()`` in this function, in code that does not train since (a
        validation pass after the training loop of the same epoch); or, for the forward pass
        ``node``, in a loop after a ``model.eval()`` under an ``if`` and in the same branch
        (a validation loop run every few epochs)."""
        fn = ctx.fn
        depth = ctx.scratch.get(_EVAL_MODE, {}).get(id(fn.node))
        if depth is None and node is not None:
            block = ctx.scratch.get(_EVAL_BLOCK, {}).get(id(fn.node))
            if block is not None and block[1] <= getattr(node, "lineno", 0) <= block[2] and \
                    len(ctx.loops) > block[0]:
                depth = block[0]  # in a loop of the branch: a validation loop
        if ctx.no_grad or depth is None or len(ctx.loops) < depth or fn.facts.grad_calls:
            return False
        return not any(_trains(lp, ctx) for lp in ctx.loops[depth:])

    def _mode(self, node: ast.Call, ctx: Context) -> None:
        """Follow ``model.eval()`` / ``model.train()`` in the function's execution order."""
        func = node.func
        if type(func) is not ast.Attribute or func.attr not in ("eval", "train") or \
                node.keywords or len(node.args) > 1 or ctx.kind(func.value) & VALUE:
            return
        arg = node.args[0] if node.args else None
        off = func.attr == "eval" and arg is None or func.attr == "train" and \
            isinstance(arg, ast.Constant) and arg.value is False
        modes = ctx.scratch.setdefault(_EVAL_MODE, {})
        blocks = ctx.scratch.setdefault(_EVAL_BLOCK, {})
        if off and ctx.cond_depth == (ctx.loops[-1].cond_depth if ctx.loops else 0):
            modes.setdefault(id(ctx.fn.node), len(ctx.loops))
        elif off:
            end = branch_end(ctx.fn.node, node.lineno)
            if end is not None:  # until the end of the if's branch (or a .train())
                blocks[id(ctx.fn.node)] = (len(ctx.loops), node.lineno, end)
        elif func.attr == "train":
            modes.pop(id(ctx.fn.node), None)
            blocks.pop(id(ctx.fn.node), None)

    def _callee_forwards(self, node: ast.Call, ctx: Context) -> ast.AST | bool:
        """Whether ``node`` calls a function of this file that runs a forward pass and
        no ``backward()`` (``self._eval_step(batch)``, ``run_epoch(valid_data, model)``):
        the callee's node when it is resolved, ``True`` for a method out of sight."""
        summaries = ctx.summaries
        if summaries is None:
            return False
        # evaluation code: a helper imported from another file of the tree is read too
        callee = summaries.resolve(node.func, ctx.flow, evaluation=True)
        if callee is None:
            return inference_method(node, ctx)
        if runs_backward(summaries, callee.node):
            return False
        if abstract_eval_method(node, callee.node):
            return True  # a stub here, overridden out of sight
        summary = summaries.summarize(node, ctx.flow, evaluation=True)
        return callee.node if summary is not None and summary.forwards else False

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        self._mode(node, ctx)
        if ctx.loops and type(node.func) is ast.Attribute and node.func.attr in (
                "append", "extend", "insert", "appendleft", "add"):
            self.accumulate(node, ctx)
            return
        if ctx.no_grad:
            return
        if ctx.fn.node is not ctx.tree:
            note_forward(node, ctx)
        if not ctx.loops and self._straight_forward(node, ctx) or self._eval_only(node, ctx):
            return
        if ctx.loops and ctx.flow.is_forward(node, strict=True):
            flag = flag_eval(node, ctx)
            seen = ctx.scratch.setdefault(_STRAIGHT, set())
            if flag is not None and has_weights(node, ctx.fn.node, methods=True):
                if id(ctx.fn.node) not in seen:  # reported once per function
                    seen.add(id(ctx.fn.node))
                    ctx.report(self, node, (
                        f"forward pass {describe(node.func)}() runs outside torch.no_grad() "
                        f"when {flag} is false, in eval mode and with backward() only under "
                        f"'if {flag}:': autograd records a graph and saves activations that no "
                        f"backward() will use; run it under torch.no_grad() when not {flag}"))
                    note_finding(ctx)
                return
        if not ctx.loops and self._eval_named(ctx):
            closure = forwarding_closure(node, ctx)
            if closure is not None:
                ctx.report(self, node, (
                    f"{describe(node.func)}() is given {closure}(), which runs forward "
                    f"passes, in {ctx.fn.name}() outside torch.no_grad(): each call records a "
                    f"graph and saves activations that no backward() will use; call it under "
                    f"torch.no_grad() or torch.inference_mode()"))
                note_finding(ctx)
                return
        how, callee = None, None
        if ctx.loops and self._eval_context(ctx) and ctx.flow.is_forward(node) and (
                not by_callers_only(ctx) or has_weights(node, ctx.fn.node, methods=True)) or \
                ctx.loops and self._eval_mode(ctx, node) and ctx.flow.is_forward(node, strict=True):
            how = f"forward pass {describe(node.func)}()"
        elif (self._eval_mode(ctx) or ctx.loops and self._eval_named(ctx)) and \
                (callee := self._callee_forwards(node, ctx)):
            how = f"{describe(node.func)}(), which runs forward passes,"
            if not ctx.loops:
                ctx.report(self, node, (
                    f"{how} is called after .eval() outside torch.no_grad(): autograd records "
                    f"a graph and saves activations that no backward() will use; call it "
                    f"under torch.no_grad() or torch.inference_mode()"))
                note_call_site(ctx, callee if isinstance(callee, ast.AST) else None)
                return
        if how is None:
            return
        notes = ctx.scratch.setdefault(self.code, {})
        for lp in ctx.loops:
            notes.setdefault(id(lp.node), [None, None])
        entry = notes[id(ctx.loops[-1].node)]
        if entry[0] is None:
            entry[0] = (node, how, callee if isinstance(callee, ast.AST) else None)

    def _straight_forward(self, node: ast.Call, ctx: Context) -> bool:
        """The first forward pass after ``model.eval()`` outside any loop, in a function that
        never differentiates (a one-shot inference script): reported once per function."""
        fn = ctx.fn
        if fn.facts.has_backward or fn.facts.has_step or not self._eval_mode(ctx) or \
                not ctx.flow.is_forward(node, strict=True) or returns_value(fn.node) or \
                not has_weights(node, fn.node):
            return False  # a returned output may be differentiated by the caller
        seen = ctx.scratch.setdefault(_STRAIGHT, set())
        if id(fn.node) in seen:
            return True
        seen.add(id(fn.node))
        ctx.report(self, node, (
            f"forward pass {describe(node.func)}() after .eval() runs outside "
            f"torch.no_grad(), in a function that never calls backward(): autograd records a "
            f"graph and saves activations that no backward() will use; run it under "
            f"torch.no_grad() or torch.inference_mode()"))
        note_finding(ctx)
        return True

    def _eval_only(self, node: ast.Call, ctx: Context) -> bool:
        """``self.lm(x)`` in a method of a plain class whose ``__init__`` put ``self.lm``
        in eval mode for good, in a method that never differentiates: reported once per
        method."""
        fn = ctx.fn
        if fn.name == "__init__" or fn.facts.has_backward or fn.facts.has_step or \
                fn.facts.grad_calls:
            return False
        attr = eval_only_attr(node, ctx)
        if attr is None:
            return False
        seen = ctx.scratch.setdefault(_STRAIGHT, set())
        if id(fn.node) not in seen:
            seen.add(id(fn.node))
            ctx.report(self, node, (
                f"forward pass {describe(node.func)}() outside torch.no_grad(): "
                f"{fn.class_name}.__init__ (or a method it calls) puts self.{attr} in eval "
                f"mode and nothing trains it, yet each call of {fn.name}() records a graph and saves activations that no "
                f"backward() will use; run it under torch.no_grad() or torch.inference_mode()"))
            note_finding(ctx)
        return True

    def _eval_named(self, ctx: Context) -> bool:
        fn = ctx.fn
        return not (ctx.no_grad or fn.facts.has_backward or fn.facts.has_step) and (
            fn.eval_named() or fn.eval_callers or any(lp.eval_loader for lp in ctx.loops))

    def accumulate(self, node: ast.AST, ctx: Context) -> None:
        if not self._eval_context(ctx):
            return
        acc = accumulation(node, ctx)
        if acc is None or not ctx.kind(acc.value) & GRAPH:
            return
        loops = ctx.persistent_loops(acc.key)
        if not loops or not _fresh(acc.value, loops):
            return
        notes = ctx.scratch.setdefault(self.code, {})
        entry = notes.setdefault(id(ctx.loops[-1].node), [None, None])
        if entry[1] is None:
            entry[1] = (acc, node)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        if ctx.loops:
            self.accumulate(node, ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if ctx.loops:
            self.accumulate(node, ctx)

    def leave_function(self, state: FunctionState, ctx: Context) -> None:
        if state.node is ctx.tree:  # the module's end: one finding per bug
            settle(ctx)
            return
        found = thrown_away(ctx)
        if found is not None and id(state.node) not in found_in(ctx):
            ctx.report(self, found[0], message(found[0], state.name, found[1]))
            note_finding(ctx)

    def leave_loop(self, loop: LoopState, ctx: Context) -> None:
        modes = ctx.scratch.get(_EVAL_MODE)
        if modes and modes.get(id(ctx.fn.node), -1) >= len(ctx.loops):
            del modes[id(ctx.fn.node)]  # model.eval() inside this loop: its scope ends here
        blocks = ctx.scratch.get(_EVAL_BLOCK)
        if blocks and blocks.get(id(ctx.fn.node), (-1,))[0] >= len(ctx.loops):
            del blocks[id(ctx.fn.node)]
        notes = ctx.scratch.get(self.code)
        if not notes:
            return
        entry = notes.pop(id(loop.node), None)
        if entry is None or entry[0] is None and entry[1] is None:
            return
        forward, kept = entry
        if ctx.loops[:-1]:  # an enclosing loop must not report the same forward pass again
            outer = notes.setdefault(id(ctx.loops[-2].node), [None, None])
            outer[0] = outer[0] or False
            outer[1] = outer[1] or False
        if forward is False or kept is False:
            return
        if by_callers_only(ctx):  # the forward pass is certain; what is kept, less so
            kept = None
        if kept:
            acc, _ = kept
            v = describe(acc.value)
            ctx.report(self, acc.value, (
                f"evaluation loop keeps '{v}' in '{acc.key}' outside torch.no_grad(): every "
                f"batch's autograd graph and saved activations stay alive; wrap the loop in "
                f"torch.no_grad() or torch.inference_mode()"))
            note_finding(ctx)
        elif forward is not None:
            call, how, callee = forward
            ctx.report(self, call, (
                f"{how} in an evaluation loop runs outside "
                f"torch.no_grad(): autograd records a graph and saves activations that no "
                f"backward() will use; wrap the loop in torch.no_grad() or "
                f"torch.inference_mode()"))
            note_call_site(ctx, callee)
