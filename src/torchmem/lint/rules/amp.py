"""TMM6xx: mixed-precision misuse (``GradScaler`` and ``autocast``); and TMM906.

A ``GradScaler`` multiplies the loss before ``backward()`` so that float16 gradients do
not underflow, then divides the gradients by the same factor in ``step()`` and adapts the
factor in ``update()``. The three calls only work together, and only around a forward
pass that runs under ``autocast``. These rules find the pieces that are missing or in the
wrong place (``TMM906``, an opinionated performance rule, finds a scaler without
autocast). A scaler is a ``GradScaler`` the file builds (under any import), a parameter
annotated as one, or a parameter named like one whose ``update()`` the function calls;
Accelerate and Lightning keep theirs out of sight, so their training loops get no
finding.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.facts import key_of, target_keys
from torchmem.lint.knowledge import last_name
from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._amp import (
    SCALER_NAME,
    calls_method,
    disabled,
    done_here,
    function_text,
    guarded,
    is_autocast,
    is_scaler_ctor,
    scaler_evidence,
    scalers,
    scales_own_loss,
    tensor_backward,
)
from torchmem.lint.rules._common import describe

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["BackwardUnderAutocast", "ScalerStepUnscaled", "ScalerWithoutAutocast",
           "ScalerWithoutUpdate"]

#: words that show a file runs something in reduced precision
_LOW_PRECISION = ("autocast", "half", "float16", "fp16", "bf16", "amp_dtype", "precision")


def _mentions_low_precision(ctx: Context) -> bool:
    """Whether the code of the file (names, attributes, keywords, strings; not comments
    or docstrings) mentions autocast or a reduced precision."""
    cached = ctx.scratch.get("amp_low_precision")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    docstrings = {id(n.value) for n in ast.walk(ctx.tree) if type(n) is ast.Expr} \
        if ctx.tree is not None else set()
    found = False
    for node in ast.walk(ctx.tree) if ctx.tree is not None else ():
        word: str | None = None
        if isinstance(node, ast.Name):
            word = node.id
        elif isinstance(node, ast.Attribute):
            word = node.attr
        elif isinstance(node, ast.keyword):
            word = node.arg
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            word = node.name
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) not in docstrings:
            word = node.value
        if word and any(w in word.lower() for w in _LOW_PRECISION):
            found = True
            break
    ctx.scratch["amp_low_precision"] = found
    return found


def _scaler_step(node: ast.Call) -> str | None:
    """The key of ``K`` in ``K.step(optimizer)``, else ``None``."""
    func = node.func
    if type(func) is not ast.Attribute or func.attr != "step":
        return None
    if not node.args and not any(kw.arg == "optimizer" for kw in node.keywords):
        return None
    return key_of(func.value)


@register
class ScalerStepUnscaled(Rule):
    """``scaler.step(optimizer)`` after a ``backward()`` on a loss ``scaler.scale()`` never saw.

    What:
        Flags ``scaler.step(optimizer)``, where ``scaler`` is a ``GradScaler``, in a
        function whose ``backward()`` calls are all on plain tensors and which never
        calls ``scaler.scale(...)``, itself or through a function of the same file that
        it calls (a ``scale_loss()`` helper). A ``backward()`` in a branch of an ``if``
        that tests the scaler (``if scaler is None: loss.backward()``) is the unscaled
        path of code that handles both: no finding.

    Why:
        ``step()`` divides the gradients by the current scale (65536 at first) before the
        optimizer uses them, because it assumes ``backward()`` ran on
        ``scaler.scale(loss)``. If nothing was ever scaled, the first ``step()`` raises
        ``AssertionError: Attempted step but _scale is None``; if ``scale()`` ran
        somewhere else before, every update is 65536 times too small and training stalls
        without an error.

    Known problems:
        A scaler is recognised when the file builds it (``GradScaler(...)`` under any
        import, ``ShardedGradScaler``), when a parameter is annotated ``GradScaler``, or
        when a parameter named like one (``scaler``, ``grad_scaler``, ``loss_scaler``) has
        ``update()`` called in the same function. A loss scaled in another file and
        returned is not seen (that code would be unusual). Wrappers' ``backward(loss)``
        (Accelerate, DeepSpeed, Lightning) scale for you: no finding.

    Example:
        ```python
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            loss.backward()
            scaler.step(optimizer)
            scaler.update()
        ```

    Use instead:
        ```python
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        ```
    """

    code = "TMM601"
    name = "scaler-step-unscaled"
    summary = "GradScaler.step() after a backward() on a loss that scaler.scale() never saw"
    category = "correctness"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        key = _scaler_step(node)
        if key is None or scaler_evidence(key, ctx) is None:
            return
        if done_here(ctx, key, "scale"):
            return
        calls = ctx.fn.facts.backward_calls
        if not calls or not all(tensor_backward(c) for c in calls):
            return
        if all(guarded(c, key, ctx) for c in calls):
            return  # if scaler is None: loss.backward() (the scaled case is elsewhere)
        ctx.report(self, node, (
            f"'{describe(node)}' unscales gradients, but the backward() in this function is on "
            f"a loss that {key}.scale() never saw: step() raises if nothing was ever scaled, "
            f"or divides the unscaled gradients by the scale (65536 at first); call "
            f"{key}.scale(loss).backward()"))


@register
class ScalerWithoutUpdate(Rule):
    """``scaler.step(optimizer)`` on every iteration, but ``scaler.update()`` not in that loop.

    What:
        Flags ``scaler.step(optimizer)`` inside a loop when ``scaler.update()`` runs
        neither in the training loop (the innermost loop around the step that also calls
        ``backward()``; the function when no loop does) nor in a function of the same
        file that this loop calls (any receiver with the scaler's name counts). An
        ``update()`` once per epoch, after the batch loop, is too late; after a loop
        over several optimizers, inside the batch loop, it is where it belongs.

    Why:
        ``update()`` adapts the scale and re-arms the scaler for the next iteration. Without
        it, the second ``step()`` raises ``RuntimeError: step() has already been called
        since the last update()``, and the scale never backs off after an overflow.

    Known problems:
        An ``update()`` made in another file (a trainer's hook) is not seen; the scaler
        must be known as in ``TMM601`` (built in the file, annotated, or used with
        ``scale()`` under a scaler's name).

    Example:
        ```python
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
        ```

    Use instead:
        ```python
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        ```
    """

    code = "TMM602"
    name = "scaler-without-update"
    summary = "GradScaler.step() in a training loop that never calls scaler.update()"
    category = "correctness"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if not ctx.loops:
            return
        key = _scaler_step(node)
        if key is None:
            return
        last = last_name(key)
        # the loop whose iterations are training steps: the innermost one around the step
        # that also runs backward() (not a loop over several optimizers inside it)
        loop = next((lp for lp in reversed(ctx.loops) if lp.facts.backward), None)
        if done_here(ctx, key, "update", loop.node if loop is not None else None):
            return
        if key in scalers(ctx).disabled and key not in ctx.fn.facts.defs or any(
                isinstance(v, ast.Call) and is_scaler_ctor(v, ctx) and disabled(v)
                for v in ctx.fn.facts.defs.get(key, ())):
            return
        if scaler_evidence(key, ctx) is None and not (
                SCALER_NAME.match(last) and calls_method(function_text(ctx), key, "scale")):
            return
        where = ("runs outside the loop that steps" if loop is not None
                 and done_here(ctx, key, "update") else "is never called")
        ctx.report(self, node, (
            f"'{describe(node)}' runs on every iteration but {key}.update() {where}: "
            f"the second step() raises 'step() has already been called since the last "
            f"update()'; call {key}.update() after each step()"))


@register
class BackwardUnderAutocast(Rule):
    """``backward()`` inside a ``with torch.autocast(...)`` block.

    What:
        Flags a ``backward()`` call (``loss.backward()``,
        ``scaler.scale(loss).backward()``) in the body of ``with torch.autocast(...)``,
        ``torch.cuda.amp.autocast()`` or ``torch.amp.autocast(...)`` (not
        ``enabled=False``).

    Why:
        The PyTorch AMP documentation: "Backward passes under autocast are not
        recommended. Backward ops run in the same type that autocast used for
        corresponding forward ops." Autocast only needs to cover the forward pass and the
        loss; ending the block before ``backward()`` makes that visible. It changes no
        result and no memory, hence off by default (hygiene).

    Known problems:
        Only ``with`` blocks in the same function are seen (an ``@autocast()`` decorator on
        the function is not).

    Example:
        ```python
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
                loss.backward()
            optimizer.step()
        ```

    Use instead:
        ```python
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        ```
    """

    code = "TMM603"
    name = "backward-under-autocast"
    summary = "backward() called inside a torch.autocast block"
    category = "hygiene"
    default_enabled = False

    def visit_With(self, node: ast.With, ctx: Context) -> None:
        for item in node.items:
            expr = item.context_expr
            on = is_autocast(expr, ctx)
            off = type(expr) is ast.Call and disabled(expr) and (
                ctx.qualname(expr.func) or "").endswith("autocast")
            if on or off:
                spans = ctx.scratch.setdefault(self.code, [])
                spans.append((id(ctx.fn.node), node.body[0].lineno, node.end_lineno or 0, on))

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        spans = ctx.scratch.get(self.code)
        if not spans or getattr(node.func, "attr", "") != "backward":
            return
        if not any(node is c for c in ctx.fn.facts.backward_calls):
            return
        fn, line = id(ctx.fn.node), node.lineno
        inside = [s for s in spans if s[0] == fn and s[1] <= line <= s[2]]
        if not inside or not max(inside, key=lambda s: s[1])[3]:
            return
        ctx.report(self, node, (
            f"'{describe(node)}' runs inside a torch.autocast block: backward passes under "
            f"autocast are not recommended (backward ops already use the forward ops' dtypes); "
            f"end the with block before backward()"))


@register
class ScalerWithoutAutocast(Rule):
    """A ``GradScaler`` in a file where nothing runs in reduced precision.

    What:
        Flags ``GradScaler(...)`` (not ``enabled=False``) in a file that steps it
        (``scaler.step(optimizer)``) and scales a loss it computes itself
        (``scaler.scale(loss)`` where ``loss`` is not a parameter of the function), but
        whose code (names, attributes, keywords and strings; not comments) never
        mentions ``autocast``, ``half``, ``float16``, ``fp16``, ``bf16`` or
        ``precision``. It is a ``TMM9xx`` (opinionated performance) rule that lives with
        the mixed-precision rules.

    Why:
        Loss scaling exists for float16 gradients. Without ``autocast`` the forward pass
        runs in float32: the scaler only costs an unscale and an inf check per step, and
        the memory and speed that mixed precision would bring are not there. Often the
        ``with torch.autocast(...)`` around the forward pass was simply forgotten.

    Known problems:
        The forward pass may run under autocast in another file (a model whose
        ``forward`` is decorated, a trainer that wraps the call); the rule only reads the
        file that builds the scaler. A scaler that is never stepped is a plain loss
        multiplier (``scaler.scale(loss).backward(); optimizer.step()``, used with
        networks that run in half precision inside an extension): no finding. Off by
        default.

    Example:
        ```python
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        ```

    Use instead:
        ```python
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        ```
    """

    code = "TMM906"
    name = "scaler-without-autocast"
    summary = "GradScaler in a file where nothing runs under autocast or in half precision"
    category = "performance"
    default_enabled = False

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        self._check(node.targets, node.value, ctx)

    def visit_AnnAssign(self, node: ast.AnnAssign, ctx: Context) -> None:
        if node.value is not None:
            self._check([node.target], node.value, ctx)

    def _check(self, targets: list[ast.expr], value: ast.expr, ctx: Context) -> None:
        calls = [v for v in ((value.body, value.orelse) if type(value) is ast.IfExp else (value,))
                 if is_scaler_ctor(v, ctx) and not disabled(v)]  # type: ignore[arg-type]
        if not calls or ".scale(" not in ctx.source:
            return
        names = {k for t in targets for k in target_keys(t)}
        if not any(calls_method(ctx.source, last_name(k), "step") for k in names):
            return  # never stepped: a loss multiplier, not mixed-precision training
        if not any(scales_own_loss(ctx, name) for name in names):
            return  # a wrapper's scaler: the forward pass is its caller's
        if _mentions_low_precision(ctx):
            return
        call = calls[0]
        ctx.report(self, call, (
            f"'{describe(call)}' scales the loss, but nothing in this file runs under "
            f"autocast or in half precision: the forward pass runs in float32 and the scaler "
            f"only adds work; wrap the forward pass in torch.autocast(...)"))
