"""TMM9xx: opinionated performance rules, off by default (``--select TMM9`` enables them).

These rules point at throughput costs (host-device synchronisation, pageable-memory
copies) that are often acceptable, and at intermediates that an equivalent call would not
allocate (a broadcast pairwise difference, a ``.contiguous()`` copy before a matrix
product: ``TMM904``, ``TMM905``), or a gradient scaler where nothing runs under autocast
(``TMM906``). Enable them with ``--select TMM9`` (or ``ALL``) when tuning a training
loop.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import GRAPH, LOOSE, PINNED, TENSOR, UNPINNED
from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._common import describe

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["SyncInHotLoop", "DataLoaderPinMemory", "NonBlockingUnpinned"]

_SYNC = frozenset({"item", "cpu", "tolist", "numpy"})


@register
class SyncInHotLoop(Rule):
    """``.item()`` / ``.cpu()`` / ``.tolist()`` on every iteration of a training loop.

    What:
        Flags ``.item()``, ``.cpu()``, ``.tolist()`` and ``.numpy()`` on a tensor computed
        in the loop, executed unconditionally in a training loop.

    Why:
        Reading a CUDA tensor's value on the host waits for every queued kernel to finish:
        the CPU cannot queue the next iteration's work while the GPU drains, and the GPU
        idles while the CPU catches up. Once per step is often acceptable; it is a
        throughput cost, not a memory one, hence off by default.

    Known problems:
        On CPU-only code the call costs nothing. Logging every N steps, or accumulating on
        the device (``total += loss.detach()``) and reading once per epoch, avoids it.

    Example:
        ```python
        running = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running += loss.item()
        ```

    Use instead:
        ```python
        running = torch.zeros((), device=device)
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running += loss.detach()
        print(running.item())
        ```
    """

    code = "TMM901"
    name = "sync-in-hot-loop"
    summary = "host-device synchronisation (.item(), .cpu()) on every training step"
    default_enabled = False
    category = "performance"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not ctx.loops or type(func) is not ast.Attribute or func.attr not in _SYNC:
            return
        loop = ctx.loops[-1]
        if not loop.training or not ctx.every_iteration(loop) or node.args:
            return
        kind = ctx.kind(func.value)
        if not kind & (GRAPH | TENSOR) or kind & LOOSE:
            return
        ctx.report(self, node, (
            f"'{describe(func.value)}.{func.attr}()' on every training step makes the host wait "
            f"for the device; read values every N steps or accumulate on the device"))


@register
class DataLoaderPinMemory(Rule):
    """A ``DataLoader`` without ``pin_memory`` in code that moves batches to CUDA.

    What:
        Flags ``DataLoader(...)`` calls that do not pass ``pin_memory=`` in a function
        that also moves data to CUDA (``.cuda()``, ``"cuda"``, ``non_blocking=True``).

    Why:
        A host-to-device copy from pageable memory first goes through a pinned staging
        buffer, and it cannot overlap with compute. ``pin_memory=True`` lets the loader's
        pin thread put batches in page-locked memory, so ``.to(device, non_blocking=True)``
        is truly asynchronous.

    Known problems:
        Pinned memory is a scarce resource on some systems; with very large batches or
        many workers it can hurt. The rule only checks that the choice is made
        explicitly (``pin_memory=False`` silences it).

    Example:
        ```python
        loader = DataLoader(dataset, batch_size=64, num_workers=4)
        for x, y in loader:
            x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)
        ```

    Use instead:
        ```python
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:
            x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)
        ```
    """

    code = "TMM902"
    name = "dataloader-pin-memory"
    summary = "DataLoader without pin_memory= in code that copies batches to CUDA"
    default_enabled = False
    category = "performance"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        name = func.id if type(func) is ast.Name else getattr(func, "attr", "")
        if name != "DataLoader":
            return
        qual = ctx.qualname(func)
        if qual is None or not qual.endswith(".DataLoader") or not qual.startswith("torch."):
            return
        if any(kw.arg in ("pin_memory", None) for kw in node.keywords):
            return
        node_fn = ctx.fn.node
        if isinstance(node_fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and node_fn.end_lineno:
            src = "\n".join(ctx.lines()[node_fn.lineno - 1:node_fn.end_lineno])
        else:
            src = ctx.source
        if ".cuda(" not in src and "'cuda" not in src and '"cuda' not in src \
                and "non_blocking" not in src:
            return
        ctx.report(self, node, (
            "DataLoader without pin_memory= in code that copies batches to CUDA: copies from "
            "pageable memory are staged and cannot overlap compute; pass pin_memory=True"))


@register
class NonBlockingUnpinned(Rule):
    """``.to(device, non_blocking=True)`` on a tensor in pageable (unpinned) memory.

    What:
        Flags ``x.to(..., non_blocking=True)`` / ``x.cuda(non_blocking=True)`` when ``x``
        comes from a ``DataLoader`` built in the same file without ``pin_memory=True``, or
        from a CPU factory call without ``pin_memory=True``.

    Why:
        A non-blocking copy is asynchronous only from page-locked memory. From pageable
        memory the driver copies synchronously through a staging buffer: the flag buys
        nothing, and it suggests an overlap that does not happen.

    Known problems:
        Only tensors whose origin is visible in the same function are checked.

    Example:
        ```python
        loader = DataLoader(dataset, batch_size=64)
        for x, y in loader:
            x = x.to("cuda", non_blocking=True)
        ```

    Use instead:
        ```python
        loader = DataLoader(dataset, batch_size=64, pin_memory=True)
        for x, y in loader:
            x = x.to("cuda", non_blocking=True)
        ```
    """

    code = "TMM903"
    name = "non-blocking-unpinned"
    summary = "non_blocking=True copy from unpinned memory"
    default_enabled = False
    category = "performance"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if type(func) is not ast.Attribute or func.attr not in ("to", "cuda"):
            return
        if not any(kw.arg == "non_blocking" and isinstance(kw.value, ast.Constant)
                   and kw.value.value is True for kw in node.keywords):
            return
        kind = ctx.kind(func.value)
        if not kind & UNPINNED or kind & PINNED:
            return
        ctx.report(self, node, (
            f"'{describe(func.value)}' is in pageable memory, so non_blocking=True copies "
            f"synchronously; pin it (DataLoader(pin_memory=True) or .pin_memory())"))
