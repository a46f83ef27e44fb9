"""One function for training and evaluation, switched by a flag parameter (no torch).

``def run_epoch(model, loader, is_train):`` with ``if is_train: model.train()`` /
``else: model.eval()``, and every ``backward()`` and optimizer ``step()`` under
``if is_train:``. When the flag is false the function is evaluation code, yet the forward
pass outside ``if is_train:`` (``out = model(x)``, shared by both paths) records a graph
that no ``backward()`` will use.

What makes the function one: the flag is a parameter never assigned in the function; one
``if flag:`` / ``if not flag:`` statement puts the model in eval mode on the false path
(``.eval()`` as a statement of that branch), or one statement ``model.train(flag)`` /
``model.train(mode=flag)`` does it when the flag is false; every ``backward()``/``step()`` call, and every
call of a function of the file that runs one, is inside a branch taken only when the flag
is true. The forward passes that count come after that switch, outside such branches.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.children import all_statements
from torchmem.lint.facts import mode_flag
from torchmem.lint.step_calls import runs_backward

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context

__all__ = ["flag_eval"]

_SCRATCH = "flag_switch"


_TRAIN_WORDS = frozenset({"train", "training", "fit"})
_EVAL_WORDS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test", "dev",
                         "predict", "inference"})


def _phase(node: ast.expr) -> bool | None:
    """``True`` for a constant naming the training phase (``"train"``), ``False`` for one
    naming an evaluation phase (``"val"``, ``"test"``), else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        word = node.value.lower()
        return True if word in _TRAIN_WORDS else False if word in _EVAL_WORDS else None
    return None


def _flag(test: ast.expr) -> tuple[str, bool] | None:
    """``(name, polarity)`` for ``if name:`` / ``if not name:``, and for ``if phase ==
    "train":`` (``phase == "val"``, ``phase != "train"``...), the name then written as the
    comparison with the training phase, true when it is."""
    if type(test) is ast.Name:
        return test.id, True
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not and type(test.operand) is ast.Name:
        return test.operand.id, False
    if type(test) is ast.Compare and type(test.left) is ast.Name and \
            len(test.ops) == 1 and type(test.ops[0]) in (ast.Eq, ast.NotEq):
        train = _phase(test.comparators[0])
        if train is None:
            return None
        return f"{test.left.id} == 'train'", train == (type(test.ops[0]) is ast.Eq)
    return None


def _phase_loops(fn: ast.AST) -> frozenset[str]:
    """Flags of loops over phases: ``for phase in ["train", "val"]:`` gives
    ``phase == 'train'`` (the literal names a training and an evaluation phase)."""
    out = set()
    for stmt in all_statements(fn):
        if type(stmt) is ast.For and type(stmt.target) is ast.Name and \
                type(stmt.iter) in (ast.List, ast.Tuple):
            kinds = {_phase(e) for e in stmt.iter.elts}  # type: ignore[attr-defined]
            if kinds == {True, False}:
                out.add(f"{stmt.target.id} == 'train'")
    return frozenset(out)


def _evals(stmts: list[ast.stmt]) -> bool:
    """Whether a branch puts a module in eval mode as one of its statements."""
    for stmt in stmts:
        value = stmt.value if type(stmt) is ast.Expr else None  # type: ignore[attr-defined]
        if type(value) is ast.Call and type(value.func) is ast.Attribute and \
                value.func.attr == "eval" and not value.args and not value.keywords:
            return True
    return False


def _trains(call: ast.Call, ctx: Context, cls: str | None) -> bool:
    func = call.func
    if type(func) is ast.Attribute and func.attr in ("backward", "step"):
        return True
    summaries = ctx.summaries
    if summaries is None:
        return False
    target = None
    if type(func) is ast.Name:
        target = summaries.functions.get(func.id)
    elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
            func.value.id == "self" and cls in summaries.classes:
        target = summaries._method(summaries.classes[cls], func.attr)  # type: ignore[index]
    return target is not None and runs_backward(summaries, target)


def _analyse(fn: ast.AST, params: frozenset[str], ctx: Context, cls: str | None
             ) -> tuple[str, int, frozenset[int]] | None:
    """``(flag, line after the switch, ids of the nodes run only when the flag is true)``."""
    switches: list[tuple[str, ast.stmt]] = []
    true_bodies: dict[str, list[list[ast.stmt]]] = {}
    for stmt in all_statements(fn):
        if type(stmt) is ast.Assign or type(stmt) is ast.AugAssign or \
                type(stmt) is ast.AnnAssign:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for tg in targets:
                for n in ast.walk(tg):
                    if type(n) is ast.Name:
                        params = params - {n.id}  # the flag must keep its argument's value
            continue
        value = stmt.value if type(stmt) is ast.Expr else None  # type: ignore[attr-defined]
        if type(value) is ast.Call and type(value.func) is ast.Attribute and \
                value.func.attr == "train" and mode_flag(value) is not None:
            switches.append((mode_flag(value), stmt))  # type: ignore[arg-type]
            true_bodies.setdefault(mode_flag(value), [])  # type: ignore[arg-type]
            continue
        if type(stmt) is not ast.If:
            continue
        found = _flag(stmt.test)  # type: ignore[attr-defined]
        if found is None:
            continue
        name, positive = found
        on_true = stmt.body if positive else stmt.orelse  # type: ignore[attr-defined]
        on_false = stmt.orelse if positive else stmt.body  # type: ignore[attr-defined]
        true_bodies.setdefault(name, []).append(on_true)
        if _evals(on_false) and not _evals(on_true):
            switches.append((name, stmt))  # type: ignore[arg-type]
    if len({name for name, _ in switches}) != 1:
        return None
    flag, switch = switches[0]
    if flag not in params and flag.partition(" ==")[0] not in params and \
            flag not in _phase_loops(fn):
        return None
    guarded = frozenset(id(n) for body in true_bodies[flag] for stmt in body
                        for n in ast.walk(stmt))
    trains = False
    for node in ast.walk(fn):
        if type(node) is ast.Call and _trains(node, ctx, cls):
            if id(node) not in guarded:
                return None  # trains on the false path too
            trains = True
    if not trains:
        return None
    return flag, switch.end_lineno or switch.lineno, guarded


def flag_eval(call: ast.Call, ctx: Context) -> str | None:
    """The flag when ``call`` runs on the evaluation path of a function that trains or
    evaluates by a flag parameter: after the switch, outside the flag's true branches."""
    fn = ctx.fn
    facts = fn.facts
    if not (facts.eval_receivers or facts.mode_flags) or not (facts.has_backward or
                                                              facts.has_step):
        return None
    memo = ctx.scratch.setdefault(_SCRATCH, {})
    key = id(fn.node)
    if key not in memo:  # once per function that both calls .eval() and trains
        memo[key] = _analyse(fn.node, facts.params, ctx, fn.class_name)
    found = memo[key]
    if found is None:
        return None
    flag, after, guarded = found
    if call.lineno <= after or id(call) in guarded:
        return None
    return flag
