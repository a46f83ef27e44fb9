"""TMM106: device tensors kept across the iterations of an inference loop.

Part of the TMM1xx family (:mod:`torchmem.lint.rules.graph`: values kept alive across
iterations). Under ``torch.no_grad()`` no graph is kept, but a tensor on the GPU kept in a
list for the whole data set still holds its device memory: ``preds.append(model(x))`` after
``x = x.to(device)`` grows the GPU memory with every batch until the loop ends.

Where a value lives is read from the code of the function, in execution order (no torch):
a value is on a device when it comes from ``.cuda()`` or ``.to(<device>)`` (a name or
attribute named like ``device``/``cuda``/``gpu``, a ``"cuda..."`` string,
``torch.device("cuda...")``), from a forward pass or a method of a module given such a
value, from a module moved to a device, from a tensor method, an item, an attribute or
arithmetic on such a value, or from the ``outputs``/``batch`` arguments of a PyTorch
Lightning callback's ``on_*_batch_end`` hook (Lightning moves them to the module's device).
``.cpu()``, ``.to("cpu")``, ``.item()``, ``.tolist()``, ``.numpy()``, ``float()`` and
functions given ``"cpu"`` take a value off the device.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import MODEL
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import is_model_name, last_name
from torchmem.lint.registry import Rule, register
from torchmem.lint.rules._common import describe, fresh

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, FunctionState

__all__ = ["DeviceTensorsKept"]

#: scratch key: id of a function node -> names known to hold a value on a device
_ON_DEVICE = "TMM106.on_device"
#: Lightning callback hooks called once per batch with the batch and the step's outputs
_BATCH_END = frozenset({"on_validation_batch_end", "on_test_batch_end",
                        "on_predict_batch_end"})
#: tensor methods and attributes whose result is not a tensor on the device
_OFF_DEVICE = frozenset({
    "cpu", "item", "tolist", "numpy", "size", "dim", "numel", "nelement", "element_size",
    "data_ptr", "get_device", "shape", "dtype", "device", "ndim", "is_cuda", "keys",
    "__len__", "storage_offset", "stride", "is_contiguous", "requires_grad"})
#: ``insert`` left out: ``loader.insert(src, dst)`` is not always a list's
_ACC_METHODS = frozenset({"append", "appendleft", "extend"})
_DEVICE_WORDS = ("device", "cuda", "gpu")
_OFF_BUILTINS = frozenset({"float", "int", "bool", "str", "len", "list", "repr", "print"})


def _device_like(node: ast.AST) -> bool:
    """Whether ``node`` names a device other than the CPU (``device``, ``self.device``,
    ``"cuda:0"``, ``torch.device("cuda")``, ``args.gpu``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith(("cuda", "mps", "xpu"))
    if type(node) is ast.Call and node.args and getattr(node.func, "attr", "") == "device":
        return _device_like(node.args[0])
    key = key_of(node)
    if key is None:
        return False
    name = last_name(key).lower()
    return "cpu" not in name and any(w in name for w in _DEVICE_WORDS)


def _cpu_like(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "cpu" or \
        type(node) is ast.Call and bool(node.args) and isinstance(node.args[0], ast.Constant) \
        and node.args[0].value == "cpu"


class _Device:
    """Whether expressions of the current function hold values on a device."""

    def __init__(self, ctx: Context, names: dict[str, bool]) -> None:
        self.ctx = ctx
        self.names = names

    def on(self, node: ast.AST, depth: int = 0) -> bool:
        if depth > 8:
            return False
        t = type(node)
        if t is ast.Name:
            return self.names.get(node.id, False)  # type: ignore[attr-defined]
        if t is ast.Attribute:
            if node.attr in _OFF_DEVICE:  # type: ignore[attr-defined]
                return False
            key = key_of(node)
            if key is not None and key in self.names:
                return self.names[key]
            return self.on(node.value, depth + 1)  # type: ignore[attr-defined]
        if t is ast.Subscript:
            return self.on(node.value, depth + 1)  # type: ignore[attr-defined]
        if t is ast.BinOp:
            return self.on(node.left, depth + 1) or self.on(node.right, depth + 1)  # type: ignore[attr-defined]
        if t is ast.Starred:
            return self.on(node.value, depth + 1)  # type: ignore[attr-defined]
        if t is ast.Call:
            return self._call(node, depth)  # type: ignore[arg-type]
        return False

    def _call(self, node: ast.Call, depth: int) -> bool:
        func = node.func
        args = list(node.args) + [kw.value for kw in node.keywords]
        if any(_cpu_like(a) for a in args):
            return False  # .to("cpu"), move_to_device(x, "cpu")
        if type(func) is ast.Name:
            if func.id in _OFF_BUILTINS:
                return False
            if self.ctx.flow.is_forward(node, strict=True):
                return any(self.on(a, depth + 1) for a in args)
            return False  # a helper: what it returns is not known
        if type(func) is not ast.Attribute:
            return False
        attr = func.attr
        if attr in _OFF_DEVICE:
            return False
        if attr == "cuda":
            return True
        if attr == "to":
            return any(_device_like(a) for a in args) or self.on(func.value, depth + 1)
        qual = self.ctx.qualname(func) or ""
        if qual.startswith("torch."):  # torch.sigmoid(out), torch.cat(outs)
            return any(self.on(a, depth + 1) or type(a) in (ast.List, ast.Tuple) and any(
                self.on(e, depth + 1) for e in a.elts) for a in args)  # type: ignore[attr-defined]
        if qual.startswith(("np.", "numpy.")):
            return False
        receiver = func.value
        if self.on(receiver, depth + 1):
            return True  # out.argmax(1), moved_module.method(x)
        rkey = key_of(receiver)
        module = self.ctx.flow.is_forward(node, strict=True) or \
            self.ctx.kind(receiver) & MODEL or (rkey is not None and
                                                is_model_name(last_name(rkey)))
        return bool(module) and any(self.on(a, depth + 1) for a in args)


def _stored(node: ast.AST) -> tuple[str, ast.expr] | None:
    """``(container, value)`` for ``xs.append(v)`` and ``d[k] = v`` / ``d[a][b] = v`` with
    a key that is not a constant."""
    if type(node) is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        if type(func) is not ast.Attribute or func.attr not in _ACC_METHODS:
            return None
        args = node.args  # type: ignore[attr-defined]
        if len(args) != 1 or node.keywords:  # type: ignore[attr-defined]
            return None
        recv = func.value
        while type(recv) is ast.Subscript:
            recv = recv.value
        key = key_of(recv)
        return (key, args[-1]) if key else None
    if type(node) is ast.Assign and len(node.targets) == 1:  # type: ignore[attr-defined]
        target = node.targets[0]  # type: ignore[attr-defined]
        if type(target) is not ast.Subscript:
            return None
        varying = False
        while type(target) is ast.Subscript:
            varying = varying or not isinstance(target.slice, ast.Constant)
            target = target.value
        key = key_of(target)
        return (key, node.value) if key and varying else None  # type: ignore[attr-defined]
    return None


def _how(text: str) -> str:
    return (f"'{text}.cpu()', .item() or .tolist(); for a dict or tuple of tensors, each "
            f"tensor's .cpu()")


def _placed(node: ast.AST) -> bool:
    """``x.to(out_device)`` / ``x.cuda()`` as the kept value: the code chose where it goes;
    ``out.argmax(1)``: one index per sample, too small to matter."""
    return type(node) is ast.Call and type(node.func) is ast.Attribute and \
        node.func.attr in ("to", "cuda", "argmax", "argmin")


_SINK_METHODS = frozenset({"cpu", "numpy", "tolist", "item"})
_SINK_PREFIXES = ("np.", "numpy.", "pickle.", "torch.save", "json.")
_PASS_THROUGH = frozenset({"torch.cat", "torch.stack", "torch.concat", "torch.concatenate",
                           "torch.vstack", "torch.hstack"})


def _moved_off_after(key: str, loop: ast.AST, ctx: Context) -> bool:
    """Whether local container ``key`` is used after ``loop`` only to move what it holds
    to the CPU (``torch.cat(preds).cpu()``, ``np.savez(path, **results)``), at least once."""
    if "." in key:
        return False  # an attribute: used by other methods too
    fn = ctx.fn.node
    end = getattr(loop, "end_lineno", None) or 0
    parents: dict[int, ast.AST] = {}
    uses: list[ast.Name] = []
    todo: list[ast.AST] = [fn]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                  ast.ClassDef)):
                continue
            parents[id(child)] = node
            if type(child) is ast.Name and child.id == key and child.lineno > end:
                uses.append(child)
            todo.append(child)
    if not uses:
        return False
    return all(_moved_off(use, parents, ctx) for use in uses)


def _moved_off(use: ast.AST, parents: dict[int, ast.AST], ctx: Context) -> bool:
    """Whether ``use`` (a name) is, through lists, items and concatenations, moved to the
    CPU or handed to NumPy, pickle, JSON or ``torch.save``."""
    node = use
    while True:
        parent = parents.get(id(node))
        if parent is None:
            return False
        t = type(parent)
        item = t is ast.Subscript and parent.value is node  # type: ignore[attr-defined]
        spread = t is ast.keyword and parent.arg is None  # type: ignore[attr-defined]
        if t in (ast.List, ast.Tuple, ast.Starred) or item or spread:
            node = parent
            continue
        if t is ast.Call and node is not parent.func:  # type: ignore[attr-defined]
            qual = ctx.qualname(parent.func) or ""  # type: ignore[attr-defined]
            if qual.startswith(_SINK_PREFIXES):
                return True
            if qual in _PASS_THROUGH:
                node = parent
                continue
            return False
        return t is ast.Attribute and parent.attr in _SINK_METHODS  # type: ignore[attr-defined]


@register
class DeviceTensorsKept(Rule):
    """Device tensors kept for the whole run of an inference loop.

    What:
        Flags a tensor on a device (GPU) added to a local container that outlives the
        loop (``preds.append(out)``, ``results[name] = out``) in a loop that runs under
        ``torch.no_grad()``/``torch.inference_mode()``, when the container is used after the
        loop only to move what it holds to the CPU (``torch.cat(preds).cpu()``,
        ``.numpy()``, ``np.savez(path, **results)``); and, in a PyTorch Lightning callback's
        ``on_validation_batch_end``/``on_test_batch_end``/``on_predict_batch_end`` hook, a
        tensor of its ``outputs`` or ``batch`` kept on ``self``. A value is on a device when
        the function moved it there (``.cuda()``, ``.to(device)``), computed it from such a
        value (a forward pass or a module's method given it, a tensor method, an item), or
        got it from Lightning; ``.cpu()``, ``.item()``, ``.tolist()`` and ``.numpy()`` take
        it off, and a value kept as ``x.to(some_device)`` is placed on purpose.

    Why:
        Without a graph, a kept output still holds its device memory: a list of every
        batch's outputs on the GPU grows with the data set, until inference runs out of
        memory on a larger one, and ``torch.cat`` at the end needs the same memory again.
        When the values end up on the CPU anyway, moving each one as it is kept costs
        nothing and bounds the GPU memory by one batch. Lightning hands a callback the
        batch and the outputs on the module's device; a callback that keeps them keeps
        them there for the whole run.

    Known problems:
        Off by default (on trial). Where a value lives is read from the function alone: a
        model moved to the GPU elsewhere, or a batch moved by a helper
        (``self._get_batch()``), is not seen, and a ``device`` that is the CPU at run time
        is taken for a GPU. Containers used on the device after the loop
        (``torch.cat(preds)`` compared with targets on the GPU) are left alone, however
        large: whether they fit is a matter of sizes the code does not show.

    Example:
        ```python
        @torch.no_grad()
        def predict(model, loader, device):
            preds = []
            for x in loader:
                preds.append(model(x.to(device)))
            return torch.cat(preds).cpu().numpy()
        ```

    Use instead:
        ```python
        @torch.no_grad()
        def predict(model, loader, device):
            preds = []
            for x in loader:
                preds.append(model(x.to(device)).cpu())
            return torch.cat(preds).numpy()
        ```
    """

    code = "TMM106"
    name = "device-tensors-kept"
    summary = "inference loop keeps every batch's device tensors, to move them to the CPU later"
    default_enabled = False
    trial = True

    def enter_function(self, state: FunctionState, ctx: Context) -> None:
        names: dict[str, bool] = {}
        node = state.node
        if state.name in _BATCH_END and isinstance(node, (ast.FunctionDef,
                                                          ast.AsyncFunctionDef)):
            params = {a.arg for a in node.args.args}
            if {"trainer", "pl_module"} <= params:
                for p in ("outputs", "batch", "pl_module"):
                    names[p] = p in params
        ctx.scratch.setdefault(_ON_DEVICE, {})[id(node)] = names

    def _device(self, ctx: Context) -> _Device:
        names = ctx.scratch.setdefault(_ON_DEVICE, {}).setdefault(id(ctx.fn.node), {})
        return _Device(ctx, names)

    def _bind(self, target: ast.AST, value: bool, device: _Device) -> None:
        if type(target) in (ast.Tuple, ast.List):
            for elt in target.elts:  # type: ignore[attr-defined]
                self._bind(elt, value, device)
            return
        if type(target) is ast.Starred:
            self._bind(target.value, value, device)  # type: ignore[attr-defined]
            return
        key = key_of(target)
        if key is not None:
            device.names[key] = value

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        device = self._device(ctx)
        value = node.value
        if type(value) is ast.Tuple:
            for target in node.targets:
                if type(target) is ast.Tuple and len(target.elts) == len(value.elts):
                    for t, v in zip(target.elts, value.elts):
                        self._bind(t, device.on(v), device)
                    continue
                self._bind(target, any(device.on(v) for v in value.elts), device)
        else:
            on = device.on(value)
            for target in node.targets:
                if type(target) is not ast.Subscript:
                    self._bind(target, on, device)
        self._check(node, ctx, device)

    def visit_For(self, node: ast.For, ctx: Context) -> None:
        device = self._device(ctx)
        self._bind(node.target, False, device)  # a fresh element of what is iterated

    def visit_AnnAssign(self, node: ast.AnnAssign, ctx: Context) -> None:
        if node.value is not None:
            device = self._device(ctx)
            self._bind(node.target, device.on(node.value), device)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if type(node.func) is ast.Attribute and node.func.attr in _ACC_METHODS:
            self._check(node, ctx, self._device(ctx))

    def _check(self, node: ast.AST, ctx: Context, device: _Device) -> None:
        stored = _stored(node)
        if stored is None:
            return
        key, value = stored
        hook = ctx.fn.name in _BATCH_END and key.startswith("self.")
        if not hook:
            if not ctx.loops or not ctx.no_grad:
                return
            loops = ctx.persistent_loops(key)
            if not loops or not fresh(value, loops) or self._emptied(key, loops[0].node) \
                    or not _moved_off_after(key, loops[0].node, ctx):
                return
        values = value.elts if type(value) in (ast.List, ast.Tuple) else [value]  # type: ignore[attr-defined]
        kept = next((v for v in values if device.on(v) and not _placed(v)), None)
        if kept is None:
            return
        v = describe(kept)
        if hook:
            ctx.report(self, kept, (
                f"'{v}' is on the device and '{key}' keeps one per batch for the whole "
                f"run: device memory grows with the number of batches; keep a CPU copy "
                f"instead ({_how(v)})"))
        else:
            ctx.report(self, kept, (
                f"'{v}' is on the device and '{key}' keeps one per iteration, to move them "
                f"to the CPU after the loop: device memory grows with the number of "
                f"iterations for nothing; keep a CPU copy instead ({_how(v)})"))

    @staticmethod
    def _emptied(key: str, loop: ast.AST) -> bool:
        """Whether the loop empties the container itself (``buf.clear()``, ``del buf[:]``):
        a bounded buffer."""
        for sub in ast.walk(loop):
            if type(sub) is ast.Call and type(sub.func) is ast.Attribute and \
                    sub.func.attr in ("clear", "pop", "popleft") and \
                    key_of(sub.func.value) == key:
                return True
            if type(sub) is ast.Delete and any(
                    key_of(t.value if type(t) is ast.Subscript else t) == key for t in sub.targets):
                return True
        return False
