"""TMM2xx: work that belongs outside the per-step loop (cache flushes, moves, allocations).

These rules look only at loops that run once per step: a training loop (its body calls
``backward()`` or an optimizer ``step()``) or a loop over a data loader, and only at code
that runs on every iteration (not under an ``if`` or in an ``except`` handler). Periodic
or error-handling calls are fine and stay silent.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import MODEL
from torchmem.lint.facts import key_of, target_keys
from torchmem.lint.knowledge import is_model_name, last_name
from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._forward_path import (
    beside_forward,
    on_forward_path,
    unconditional_in_forward,
)

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, LoopState

__all__ = ["EmptyCacheInLoop", "GcCollectInLoop", "ModuleToDeviceInLoop", "BufferAllocInLoop"]

_EMPTY_CACHE = frozenset({"torch.cuda.empty_cache", "torch.mps.empty_cache",
                          "torch.xpu.empty_cache", "torch.npu.empty_cache",
                          "torch.cuda.memory.empty_cache"})


def _step_loop(ctx: Context) -> LoopState | None:
    """The innermost loop when it is a per-step loop (training, or over batches) and the
    current node runs on every one of its iterations."""
    if not ctx.loops:
        return None
    loop = ctx.loops[-1]
    if not (loop.facts.per_step or loop.loader):
        return None  # (an epoch loop around the batch loop runs once per epoch)
    if not ctx.every_iteration(loop):
        return None
    return loop


@register
class EmptyCacheInLoop(Rule):
    """``torch.cuda.empty_cache()`` on every iteration of a training or data loop.

    What:
        Flags ``torch.cuda.empty_cache()`` (and the ``mps``/``xpu`` variants) called
        unconditionally in the body of a training loop or a loop over a data loader, and
        called in an ``nn.Module``'s ``forward()`` or in a method of the same class that
        ``forward()`` calls (outside an ``except`` handler): it then runs on every forward
        pass, in whatever loop drives the model; and, in any other loop, called in the
        same block as a forward pass (directly or through a function of the same file,
        ``self.pipeline.forward(batch)`` included): a request loop's
        ``if method == "forward":`` branch flushes the cache with every request.

    Why:
        ``empty_cache()`` frees no tensor: it only hands the caching allocator's unused
        blocks back to the driver, so the next iteration must ask the driver for them again
        (``cudaMalloc`` is slow and synchronises). It lowers what ``nvidia-smi`` shows, not
        what the program uses, and it does not prevent an out-of-memory error caused by live
        tensors. Calling it every step costs milliseconds per step for nothing.

    Known problems:
        In a module, a device check (``if q.device.type == "cuda":``) does not make the
        call rare and is not taken as periodic, while any other condition (an option such
        as ``if cfg.empty_unused_memory_level >= 1:``) is taken as the user's choice; a flush beside a loop over batches (once per
        epoch) is. A loop over a few very different workloads (one model per iteration) can have a
        reason to release cached blocks between them; that loop is not a training loop and
        is not flagged unless it iterates over a loader.

    Example:
        ```python
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            torch.cuda.empty_cache()
        ```

    Use instead:
        ```python
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        torch.cuda.empty_cache()  # once, after the loop, if another process needs the memory
        ```
    """

    code = "TMM201"
    name = "empty-cache-in-loop"
    summary = "torch.cuda.empty_cache() called on every iteration of a per-step loop"
    call_tails = frozenset({"empty_cache"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if getattr(node.func, "attr", "") != "empty_cache" or \
                ctx.qualname(node.func) not in _EMPTY_CACHE:
            return
        if not ctx.loops and not ctx.handler_depth and on_forward_path(ctx) and \
                unconditional_in_forward(node, ctx):
            via = "" if ctx.fn.name == "forward" else \
                f" ({ctx.fn.name}() is called from forward())"
            ctx.report(self, node, (
                f"{ast.unparse(node.func)}() runs on every forward pass of "
                f"{ctx.fn.class_name}{via}: it frees no "
                f"tensor, only returns cached blocks that the next forward pass must allocate "
                f"again, and it synchronises; call it outside the model, between phases"))
            return
        if not ctx.loops:
            return
        loop = _step_loop(ctx)
        if loop is None:
            if not ctx.handler_depth and beside_forward(node, ctx):
                ctx.report(self, node, (
                    f"{ast.unparse(node.func)}() runs before or after every forward pass of "
                    f"this loop: it frees no tensor, only returns cached blocks that the next "
                    f"forward pass must allocate again, and it synchronises; call it once "
                    f"outside the loop, or when an allocation fails"))
            return
        ctx.report(self, node, (
            f"{ast.unparse(node.func)}() runs on every iteration of the "
            f"{'training' if loop.facts.per_step else 'data'} loop: it frees no tensor, only returns "
            f"cached blocks that the next iteration must allocate again; call it outside the "
            f"loop, or every N steps if another process needs the memory"))


@register
class GcCollectInLoop(Rule):
    """``gc.collect()`` on every iteration of a training or data loop.

    What:
        Flags ``gc.collect()`` called unconditionally in the body of a training loop or a
        loop over a data loader.

    Why:
        A tensor's memory is released when its last reference goes, immediately, by
        reference counting; the cyclic garbage collector only matters for tensors trapped
        in reference cycles. A full collection walks every Python object (tens to hundreds
        of milliseconds in a large program) and, each step, mostly finds nothing.

    Known problems:
        Code that creates reference cycles holding tensors every step does free memory
        with it; fixing the cycle is the better cure.

    Example:
        ```python
        for x, y in loader:
            train_step(model, x, y)
            gc.collect()
        ```

    Use instead:
        ```python
        for step, (x, y) in enumerate(loader):
            train_step(model, x, y)
            if step % 1000 == 0:
                gc.collect()
        ```
    """

    code = "TMM202"
    name = "gc-collect-in-loop"
    summary = "gc.collect() called on every iteration of a per-step loop"
    call_tails = frozenset({"collect"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        name = func.id if type(func) is ast.Name else getattr(func, "attr", "")
        if not ctx.loops or name != "collect" or ctx.qualname(func) != "gc.collect":
            return
        loop = _step_loop(ctx)
        if loop is None:
            return
        ctx.report(self, node, (
            f"gc.collect() runs on every iteration of the "
            f"{'training' if loop.facts.per_step else 'data'} loop: tensors are freed by reference "
            f"counting, a full collection each step mostly finds nothing; call it outside the "
            f"loop or every N steps"))


def _module_receiver(node: ast.expr, ctx: Context) -> str | None:
    """Key of ``node`` when it denotes a model or a criterion."""
    key = key_of(node)
    if key is None:
        return None
    if ctx.kind(node) & MODEL:
        return key
    last = last_name(key)
    if (key.count(".") <= 1 and is_model_name(last)) or last.lower() in (
            "criterion", "loss_fn", "loss_func"):
        return key
    return None


@register
class ModuleToDeviceInLoop(Rule):
    """Moving the model or criterion to the device on every iteration.

    What:
        Flags ``model.to(device)``, ``model.cuda()`` and ``criterion.to(device)`` inside a
        training loop or a loop over a data loader, when the module is the same object on
        every iteration.

    Why:
        ``Module.to()`` walks every parameter and buffer on each call. After the first
        iteration it moves nothing, but it still costs a Python-level pass over the
        module, and it hides where the model's memory is first allocated. Move the module
        once, before the optimizer is created (so the optimizer holds the moved
        parameters).

    Known problems:
        Deliberate offloading (moving a module in and out of the GPU each step to save
        memory) is recognised when the same loop moves the module back with ``.cpu()`` or
        ``.to("cpu")``; offloading done elsewhere is flagged (silence it with
        ``# noqa: TMM203``).

    Example:
        ```python
        for x, y in loader:
            model.to(device)
            loss = criterion(model(x.to(device)), y.to(device))
        ```

    Use instead:
        ```python
        model.to(device)
        for x, y in loader:
            loss = criterion(model(x.to(device)), y.to(device))
        ```
    """

    code = "TMM203"
    name = "module-to-device-in-loop"
    summary = "model or criterion moved to a device on every iteration"
    call_tails = frozenset({"to", "cuda"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not ctx.loops or type(func) is not ast.Attribute or func.attr not in ("to", "cuda"):
            return
        loop = _step_loop(ctx)
        if loop is None:
            return
        key = _module_receiver(func.value, ctx)
        if key is None:
            return
        if func.attr == "to" and node.args and isinstance(node.args[0], ast.Constant) and not (
                isinstance(node.args[0].value, str)):
            return
        if any(key in target_keys(lp.node.target) for lp in ctx.loops  # type: ignore[attr-defined]
               if hasattr(lp.node, "target")):
            return
        if key in loop.facts.assigned and loop.facts.resets(key) and not self._self_assign(
                key, loop):
            return
        if self._offloaded(key, loop.node):
            return  # moved back to the CPU in the same loop: deliberate offloading
        ctx.report(self, node, (
            f"'{key}.{func.attr}()' runs on every iteration of the "
            f"{'training' if loop.facts.per_step else 'data'} loop although '{key}' is the same "
            f"module each time: move it once, before the loop"))

    @staticmethod
    def _offloaded(key: str, loop: ast.AST) -> bool:
        for sub in ast.walk(loop):
            if type(sub) is ast.Call and type(sub.func) is ast.Attribute and key_of(
                    sub.func.value) == key:
                if sub.func.attr == "cpu":
                    return True
                if sub.func.attr == "to" and sub.args and isinstance(
                        sub.args[0], ast.Constant) and sub.args[0].value == "cpu":
                    return True
        return False

    @staticmethod
    def _self_assign(key: str, loop: LoopState) -> bool:
        """All re-bindings of ``key`` in the loop are ``key = key.to(...)``/``.cuda()``."""
        for k, value in loop.facts.assigns:
            if k != key:
                continue
            if not (type(value) is ast.Call and type(value.func) is ast.Attribute
                    and value.func.attr in ("to", "cuda") and key_of(value.func.value) == key):
                return False
        return True


#: literal shapes with fewer elements than this are not worth a reusable buffer
_TINY = 4096
#: allocation of a buffer (random factories make fresh data on purpose and are not flagged)
_SIZE_FACTORIES = frozenset({"zeros", "ones", "empty", "full"})


def _invariant(node: ast.AST, assigned: set[str]) -> bool:
    """Whether ``node`` is built only from constants and names the loop never re-binds."""
    for sub in ast.walk(node):
        t = type(sub)
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr == "device":
            continue
        if t is ast.Call or t is ast.Subscript or t is ast.Starred:
            return False
        if (t is ast.Name or t is ast.Attribute) and key_of(sub) in assigned:
            return False
    return True


@register
class BufferAllocInLoop(Rule):
    """A constant-shape buffer allocated anew on every iteration.

    What:
        Flags ``buf = torch.zeros(1024, 1024, device=...)`` (also ``ones``, ``empty``,
        ``full``) in a training loop or a loop over a data loader when
        every size and option is a literal or a name the loop never re-binds, and the
        buffer is not kept beyond the iteration (appended, stored, returned).

    Why:
        The shape never changes, so the same memory is requested and released each step.
        On CUDA the caching allocator makes this cheap but not free, and ``zeros``/``ones``
        launch a fill kernel every time; on CPU large buffers go back to the OS and are
        faulted in again. Allocating once and resetting in place (``buf.zero_()``) makes
        the buffer's memory constant and visible.

    Known problems:
        Tiny literal shapes (under 4096 elements) are not flagged. Random factories
        (``rand``, ``randn``) are not flagged: a fresh random tensor per
        step is usually the point. Reusing a buffer is wrong when a previous iteration's value is still referenced
        (for example saved by autograd for a backward pass that has not run yet); the rule
        cannot see every such use, so its fix is a suggestion, not automatic.

    Example:
        ```python
        for x, y in loader:
            mask = torch.zeros(1024, 1024, device="cuda")
            out = model(x, mask)
        ```

    Use instead:
        ```python
        mask = torch.zeros(1024, 1024, device="cuda")
        for x, y in loader:
            mask.zero_()
            out = model(x, mask)
        ```
    """

    code = "TMM204"
    name = "buffer-alloc-in-loop"
    summary = "constant-shape tensor allocated on every iteration of a per-step loop"

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if not ctx.loops or len(node.targets) != 1 or type(node.targets[0]) is not ast.Name:
            return
        call = node.value
        # torch.zeros(...).cuda() / .to(device)
        if type(call) is ast.Call and type(call.func) is ast.Attribute and call.func.attr in (
                "cuda", "to") and type(call.func.value) is ast.Call:
            call = call.func.value
        if type(call) is not ast.Call:
            return
        qual = ctx.qualname(call.func)
        if qual is None or not qual.startswith("torch.") or last_name(qual) not in _SIZE_FACTORIES \
                or qual.count(".") != 1:
            return
        loop = _step_loop(ctx)
        if loop is None or not call.args:
            return
        name = node.targets[0].id
        if name in ctx.fn.facts.escapes:
            return
        for kw in call.keywords:
            if kw.arg in ("requires_grad", "out") or kw.arg is None:
                return
        assigned: set[str] = set()
        for lp in ctx.loops:
            assigned |= lp.facts.assigned
        if not all(_invariant(a, assigned) for a in call.args) or not all(
                _invariant(kw.value, assigned) for kw in call.keywords):
            return
        first = call.args[0]
        dims: list[ast.expr] = list(first.elts) if isinstance(first, (ast.Tuple, ast.List)) \
            else (call.args[:1] if last_name(qual) == "full" else list(call.args))
        if all(isinstance(d, ast.Constant) and isinstance(d.value, int) for d in dims):
            size = 1
            for d in dims:
                assert isinstance(d, ast.Constant)
                size *= int(d.value)  # type: ignore[arg-type]
            if size < _TINY:
                return  # a handful of elements: not worth a buffer
        ctx.report(self, call, (
            f"'{name}' gets a new {last_name(qual)}() buffer of the same shape on every "
            f"iteration of the {'training' if loop.facts.per_step else 'data'} loop; allocate it "
            f"once before the loop and reset it in place ({name}.zero_() / .fill_())"))

