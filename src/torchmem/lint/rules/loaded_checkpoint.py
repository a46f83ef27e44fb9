"""TMM109: a checkpoint loaded onto the device and kept through the loop that follows.

Part of the TMM1xx family (:mod:`torchmem.lint.rules.graph`: memory kept alive longer than
needed). ``ckpt = torch.load(path, map_location=device)`` puts every tensor of the file on
the device: a second copy of the model's weights (and of the optimizer's state when the
file has it). ``model.load_state_dict(ckpt["model"])`` copies the values into the model's
own parameters; the loaded copy stays on the device for as long as the name ``ckpt`` is
bound, which in a function that goes on to train or evaluate is the whole loop. Read from
the function alone (no torch).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from torchmem.lint.children import scope_nodes
from torchmem.lint.registry import Rule, register

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["LoadedCheckpointKept"]

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
#: words that name an accelerator device in a ``map_location`` variable
_DEVICE_WORDS = ("device", "cuda", "gpu")
#: calls on the loaded dictionary that read it (``ckpt.get("model")``, ``ckpt.keys()``)
_READS = frozenset({"get", "keys", "items", "values"})



def _on_device(value: ast.expr) -> bool:
    """Whether a ``map_location`` names an accelerator: ``"cuda"``, ``f"cuda:{rank}"``,
    ``torch.device("cuda")``, or a variable named like a device (``device``,
    ``self.device``, ``args.gpu``). ``"cpu"``, a function or a dictionary is not."""
    if type(value) is ast.Constant:
        return isinstance(value.value, str) and value.value.startswith("cuda")
    if type(value) is ast.JoinedStr:
        first = value.values[0] if value.values else None
        return type(first) is ast.Constant and str(first.value).startswith("cuda")
    if type(value) is ast.Call:
        return type(value.func) is ast.Attribute and value.func.attr == "device" and \
            bool(value.args) and _on_device(value.args[0])
    name = value.attr if type(value) is ast.Attribute else \
        value.id if type(value) is ast.Name else ""
    return any(word in name.lower() for word in _DEVICE_WORDS) and "cpu" not in name.lower()


def _fn_body(ctx: Context) -> list[ast.stmt]:
    node = ctx.fn.node if ctx.fn is not None else ctx.tree
    return list(getattr(node, "body", []))


def _uses(body: list[ast.stmt], name: str) -> Iterator[tuple[ast.Name, ast.AST | None]]:
    """Each ``Name`` node of ``name`` in ``body`` with its parent."""
    for node in scope_nodes(body):
        for child in ast.iter_child_nodes(node):
            if type(child) is ast.Name and child.id == name:
                yield child, node
    for node in body:
        if type(node) is ast.Name and node.id == name:  # pragma: no cover (not a statement)
            yield node, None


def _read_only(use: ast.Name, parent: ast.AST | None) -> bool:
    """Whether a use of the loaded dictionary only reads from it: ``ckpt["model"]``,
    ``ckpt.get("model")``, ``"ema" in ckpt``, or ``load_state_dict(ckpt)``."""
    if type(parent) is ast.Subscript and parent.value is use:
        return True
    if type(parent) is ast.Attribute and parent.attr in _READS:
        return True
    if type(parent) is ast.Compare:
        return True
    return type(parent) is ast.Call and type(parent.func) is ast.Attribute and \
        parent.func.attr == "load_state_dict" and use in parent.args


@register
class LoadedCheckpointKept(Rule):
    """A checkpoint loaded onto the device and kept while a loop runs.

    What:
        Flags ``ckpt = torch.load(path, map_location=device)`` (a device named by a string
        such as ``"cuda"``, by ``torch.device("cuda")`` or by a variable named like a
        device) when the function only reads ``ckpt`` (``ckpt["model"]``,
        ``load_state_dict(ckpt)``), never deletes or rebinds it, neither returns nor stores
        it, and runs a loop after its last use.

    Why:
        ``torch.load`` with a device ``map_location`` makes a second copy of every tensor
        of the file on that device: the model's weights and, often, the optimizer's state.
        ``load_state_dict`` copies the values into the model's own tensors; the loaded
        copy stays allocated as long as the name is bound, so the training or evaluation
        loop that follows runs with one model's worth of device memory less.

    Known problems:
        Off by default (on trial). A ``map_location`` variable is judged by its name only:
        ``device`` may hold the CPU. Uses through an alias are not followed; a loop before
        the load does not count, nor a loop in another function called after it.

    Example:
        ```python
        import torch

        def evaluate(model, loader, path, device):
            ckpt = torch.load(path, map_location=device)
            model.load_state_dict(ckpt["state_dict"])
            for batch in loader:
                model(batch.to(device))
        ```

    Use instead:
        ```python
        import torch

        def evaluate(model, loader, path, device):
            ckpt = torch.load(path, map_location="cpu")
            model.load_state_dict(ckpt["state_dict"])
            del ckpt
            for batch in loader:
                model(batch.to(device))
        ```
    """

    code = "TMM109"
    name = "loaded-checkpoint-kept"
    summary = "checkpoint loaded onto the device and kept while a later loop runs"
    default_enabled = False
    trial = True

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        value = node.value
        if type(value) is not ast.Call or len(node.targets) != 1 or \
                type(node.targets[0]) is not ast.Name or \
                type(value.func) is not ast.Attribute or value.func.attr != "load" or \
                ctx.qualname(value.func) != "torch.load":
            return
        where = next((k.value for k in value.keywords if k.arg == "map_location"),
                     value.args[1] if len(value.args) > 1 else None)
        if where is None or not _on_device(where):
            return
        name = node.targets[0].id
        body = _fn_body(ctx)
        last = node.end_lineno or node.lineno
        for stmt in scope_nodes(body):
            if stmt is node:
                continue
            if type(stmt) in (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With,
                              ast.Delete) and any(
                    type(t) is ast.Name and t.id == name for t in ast.walk(stmt)
                    if isinstance(getattr(t, "ctx", None), (ast.Store, ast.Del))):
                return  # deleted or rebound
        aliases: list[ast.AST] = []
        for use, parent in _uses(body, name):
            if type(use.ctx) is not ast.Load:
                continue
            if use.lineno < node.lineno or not _read_only(use, parent):
                return  # a use before the load (a loop that loads again), or kept
            last = max(last, use.end_lineno or use.lineno)
            if type(parent) is ast.Subscript:
                aliases.append(parent)
        for stmt in scope_nodes(body):  # state = ckpt["model"]: the loaded tensors under a new name
            if type(stmt) is ast.Assign and any(stmt.value is a for a in aliases):
                for target in stmt.targets:
                    if type(target) is ast.Name:
                        last = max([last] + [u.lineno for u, _ in _uses(body, target.id)])
        loop = min((n.lineno for n in scope_nodes(body) if isinstance(n, _LOOPS)
                    and n.lineno > last), default=None)
        if loop is None:
            return
        ctx.report(self, node, (
            f"'{name}' keeps every tensor torch.load() put on the device (a second copy of "
            f"the weights, and of the optimizer state when the file has it) through the loop "
            f"on line {loop}; load with map_location=\"cpu\", or delete '{name}' (and the names "
            f"taken from it) once the state is loaded"))
