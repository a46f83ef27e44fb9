"""Helpers shared by several rule families (no torch)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NamedTuple

from torchmem.lint.facts import key_of, mentions
from torchmem.lint.knowledge import STEP_FUNCTIONS
from torchmem.lint.step_calls import loop_trains

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context, FunctionState, LoopState

__all__ = ["Accumulation", "accumulation", "is_forward_function", "STEP_FUNCTIONS", "per_call",
           "is_hook", "outer_container",
           "describe", "loop_kind_word", "trains", "fresh"]

_ACC_METHODS = frozenset({"append", "appendleft", "extend", "insert", "add"})
_CONCAT = frozenset({"torch.cat", "torch.stack", "torch.vstack", "torch.hstack", "torch.concat",
                     "torch.concatenate", "torch.row_stack", "torch.column_stack"})

def is_hook(ctx: Context) -> bool:
    """Whether the current function is a forward hook (:mod:`torchmem.lint.hooks`)."""
    return bool(ctx.hook_outputs) and id(ctx.fn.node) in ctx.hook_outputs


def per_call(ctx: Context) -> bool:
    """Whether the current function runs once per step or per forward pass: a framework's
    ``training_step``, or a forward hook."""
    return ctx.fn.name in STEP_FUNCTIONS or is_hook(ctx)


def outer_container(key: str, fn: FunctionState) -> bool:
    """Whether ``key`` names an object that outlives a call of ``fn``: an attribute of
    ``self``, or a name the function neither binds nor receives (a closure's list)."""
    if key.startswith("self."):
        return True
    root = key.partition(".")[0]
    return root not in fn.facts.assigned and root not in fn.facts.params


class Accumulation(NamedTuple):
    """``container`` keeps ``value`` beyond the current statement.

    Attributes:
        key: the container or accumulator (``losses``, ``self.history``, ``total``).
        value: the expression whose value is kept.
        how: ``"append"``, ``"add"`` (``+=``), ``"store"`` (``d[k] = v``) or ``"concat"``.
    """

    key: str
    value: ast.expr
    how: str


def accumulation(node: ast.AST, ctx: Context) -> Accumulation | None:
    """Recognise a statement or call that adds a value to a longer-lived container.

    ``xs.append(v)`` (``d[k].append(v)``, ``d.setdefault(k, []).append(v)`` too),
    ``xs.extend(v)``, ``acc += v`` (``d[k] += v`` too, and in place: ``acc.add_(v)``,
    ``stats.get("loss").add_(v)``), ``acc = acc + v`` (or ``v + acc``,
    or a moving average ``acc = a * v + (1 - a) * acc``; ``d[k] = d[k] + v`` too), ``d[k] = v``
    (with a non-constant key), ``acc = torch.cat([acc, v])``.
    """
    t = type(node)
    if isinstance(node, ast.Call):
        func = node.func
        if type(func) is ast.Attribute and func.attr in _ACC_METHODS and node.args \
                and len(node.args) <= 2:
            recv = func.value
            while type(recv) is ast.Subscript or type(recv) is ast.Call and type(
                    recv.func) is ast.Attribute and recv.func.attr == "setdefault":
                # metrics["loss"].append(v), metrics.setdefault("loss", []).append(v): the
                # dict persists
                recv = recv.value if type(recv) is ast.Subscript else recv.func.value  # type: ignore[attr-defined]
            key = key_of(recv)
            if key is None:
                return None
            args = node.args  # type: ignore[attr-defined]
            value = args[-1] if func.attr == "insert" else args[0]
            if func.attr == "insert" and len(args) != 2 or func.attr != "insert" and len(args) != 1:
                return None
            if func.attr == "insert" and not _list_insert(key, args[0], ctx):
                return None  # db.insert(key, row), tree.insert(a, b): not list.insert
            return Accumulation(key, value, "append")
        if type(func) is ast.Attribute and func.attr == "add_" and len(node.args) == 1:
            key = _owner_key(func.value, ctx)
            return Accumulation(key, node.args[0], "add") if key else None
        return None
    if t is ast.AugAssign:
        if type(node.op) is not ast.Add:  # type: ignore[attr-defined]
            return None
        target = node.target  # type: ignore[attr-defined]
        while type(target) is ast.Subscript:  # totals[name] += v: the dict persists
            target = target.value
        key = key_of(target)
        if key is None:
            return None
        return Accumulation(key, node.value, "add")  # type: ignore[attr-defined]
    if t is ast.Assign and len(node.targets) == 1:  # type: ignore[attr-defined]
        target = node.targets[0]  # type: ignore[attr-defined]
        value = node.value  # type: ignore[attr-defined]
        if type(target) is ast.Subscript:
            key = key_of(target.value)
            if key is not None and type(value) is ast.BinOp and type(value.op) is ast.Add:
                added = _added_to_item(value, target)
                if added is not None:  # logs["loss"] = logs["loss"] + v
                    return Accumulation(key, added, "add")
            if isinstance(target.slice, ast.Constant):
                return None
            return Accumulation(key, value, "store") if key else None
        key = key_of(target)
        if key is None:
            return None
        if type(value) is ast.BinOp and type(value.op) is ast.Add:
            added = _added_to(value, key)
            if added is not None:
                return Accumulation(key, added, "add")
        if type(value) is ast.Call and value.args and ctx.qualname(value.func) in _CONCAT:
            seq = value.args[0]
            if type(seq) in (ast.List, ast.Tuple):
                elts = seq.elts  # type: ignore[attr-defined]
                if any(key_of(e) == key for e in elts):
                    rest = [e for e in elts if key_of(e) != key]
                    if len(rest) == 1:
                        return Accumulation(key, rest[0], "concat")
                    if rest:
                        tup = ast.Tuple(elts=rest, ctx=ast.Load())
                        ast.copy_location(tup, rest[0])
                        tup.end_lineno, tup.end_col_offset = rest[-1].end_lineno, rest[-1].end_col_offset
                        return Accumulation(key, tup, "concat")
    return None


def _added_to(value: ast.BinOp, key: str) -> ast.expr | None:
    """``v`` when ``value`` adds ``v`` to ``key`` or to a scaled ``key``: ``key + v``,
    ``v + key``, a moving average ``a * v + (1 - a) * key`` or ``key * d + v``; the new
    value chains the old one, whatever the weights. None otherwise."""
    left, right = value.left, value.right
    if key_of(left) == key:
        return right  # acc + a * (v - acc) too
    if _scaled(left, key) and not mentions(right, key):
        return right
    if _scaled(right, key) and not mentions(left, key):
        return left
    return None


def _owner_key(recv: ast.expr, ctx: Context) -> str | None:
    """The key of what owns the tensor ``recv`` of an in-place add: ``total`` for
    ``total.add_(v)``, ``stats`` for ``stats["loss"].add_(v)`` or
    ``stats.device_stat("loss").add_(v)``; not a module (``torch.zeros(3).add_(v)``)."""
    while type(recv) is ast.Subscript or type(recv) is ast.Call and \
            type(recv.func) is ast.Attribute:
        recv = recv.value if type(recv) is ast.Subscript else recv.func.value  # type: ignore[attr-defined]
    key = key_of(recv)
    if key is None or ctx.qualname(recv) is not None:
        return None
    return key


def _added_to_item(value: ast.BinOp, target: ast.Subscript) -> ast.expr | None:
    """``v`` when ``value`` is ``target + v`` or ``v + target`` for the same item
    (``logs["loss"] + loss``)."""
    item = ast.dump(target.value) + ast.dump(target.slice)
    for same, other in ((value.left, value.right), (value.right, value.left)):
        if type(same) is ast.Subscript and ast.dump(same.value) + ast.dump(same.slice) == item:
            return other
    return None


def _scaled(node: ast.expr, key: str) -> bool:
    """Whether ``node`` is ``key`` times or over factors that do not read it."""
    if key_of(node) == key:
        return True
    if type(node) is ast.BinOp and type(node.op) in (ast.Mult, ast.Div):
        if _scaled(node.left, key) and not mentions(node.right, key):
            return True
        return type(node.op) is ast.Mult and _scaled(node.right, key) and \
            not mentions(node.left, key)
    return False


def _list_insert(key: str, index: ast.expr, ctx: Context) -> bool:
    """Whether ``key.insert(index, v)`` is ``list.insert``: the index is an integer literal,
    or ``key`` is bound to a list in this function."""
    if isinstance(index, ast.Constant) and type(index.value) is int:
        return True
    if isinstance(index, ast.UnaryOp) and isinstance(index.operand, ast.Constant):
        return True
    for value in ctx.fn.facts.defs.get(key, ()):
        if type(value) in (ast.List, ast.ListComp) or (
                type(value) is ast.Call and getattr(value.func, "id", "") == "list"):
            return True
    return False


def is_forward_function(fn: FunctionState, ctx: Context) -> bool:
    """A module's forward computation: collecting outputs there is the computation itself."""
    name = fn.name
    return name in ("forward", "__call__", "_forward", "_call_impl") or (
        name.startswith("forward_") or name.endswith("_forward")) or (
        ctx.in_module_class and fn.class_name is not None and name not in STEP_FUNCTIONS
        and not fn.facts.has_backward and not name.startswith(("train", "fit", "eval", "val")))


def describe(node: ast.AST, limit: int = 40) -> str:
    """Short source text of an expression for messages (``loss``, ``out[:, -1]``)."""
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed node
        return "value"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def loop_kind_word(loop_training: bool) -> str:
    return "training loop" if loop_training else "loop"


def trains(loop: LoopState, ctx: Context) -> bool:
    """A training loop: its body calls ``backward()``/``step()``, directly or through a
    function of the same file (``self._backward(loss)``)."""
    if loop.training:
        return True
    summaries = ctx.summaries
    return summaries is not None and loop_trains(summaries, loop.node, ctx.fn.class_name)


def fresh(value: ast.AST, loops: list[LoopState]) -> bool:
    """Whether ``value`` is computed anew on each iteration of the outermost of ``loops``."""
    if not loops:
        return True
    assigned = loops[0].facts.assigned
    for sub in ast.walk(value):
        t = type(sub)
        if t is ast.Call:
            return True
        if (t is ast.Name or t is ast.Attribute) and key_of(sub) in assigned:
            return True
    return False
