"""Per-function facts gathered once, before the rules run (no torch).

One statement-level pass over a function body (nested functions and classes are their
own scopes and get their own pass) records, for the function and for every loop in it:
which names are (re)bound, where ``backward()`` / ``autograd.grad`` / ``optimizer.step()``
/ ``zero_grad()`` are called, and the flow-insensitive definitions of each name. From
these, :meth:`FunctionFacts.backward_callees` computes lazily which callables (``model``,
``self.criterion``...) produce the values that reach a ``backward()`` call: their results
carry an autograd graph.

Known limitations:
    Only calls that form a whole statement (``loss.backward()``, ``grads =
    torch.autograd.grad(...)``) are seen; a ``backward()`` buried inside a larger
    expression is missed. Definitions are flow-insensitive (a name's every assignment
    counts), which is what a backward slice wants.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterator

from torchmem.lint.knowledge import (
    BACKWARD_CALLERS,
    MOVE_METHODS,
    NO_GRAPH_METHODS,
    OPTIMIZER_NAME,
    SCALAR_METHODS,
    TENSOR_ONLY_METHODS,
    last_name,
)

__all__ = ["LoopFacts", "FunctionFacts", "gather", "key_of"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def key_of(node: ast.AST) -> str | None:
    """Dotted key of a name or attribute chain (``self.model.encoder``), else ``None``."""
    t = type(node)
    if t is ast.Name:
        return node.id  # type: ignore[attr-defined,no-any-return]
    if t is not ast.Attribute:
        return None
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is ast.Name:
        parts.append(node.id)  # type: ignore[attr-defined]
        return ".".join(reversed(parts))
    return None


def mentions(node: ast.AST, key: str) -> bool:
    """Whether expression ``node`` reads ``key`` (a name or attribute chain)."""
    for sub in ast.walk(node):
        if type(sub) is ast.Name or type(sub) is ast.Attribute:
            if key_of(sub) == key:
                return True
    return False


def target_keys(target: ast.AST) -> Iterator[str]:
    """Keys bound by an assignment target (names, attribute chains, tuple elements)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from target_keys(elt)
    elif isinstance(target, ast.Starred):
        yield from target_keys(target.value)
    else:
        key = key_of(target)
        if key is not None:
            yield key


class LoopFacts:
    """What a loop's body (at any depth, own scope only) does.

    Attributes:
        node: the ``for``/``while`` node.
        assigned: keys (re)bound anywhere in the body, the loop target included.
        backward: ``backward()``-like calls in the body.
        grad_calls: ``torch.autograd.grad`` calls in the body.
        step: whether an optimizer ``step()`` is called in the body.
        zero_grad: whether gradients are cleared in the body.
        parent: the enclosing loop in the same function, if any.
    """

    __slots__ = ("node", "assigned", "backward", "grad_calls", "step", "zero_grad", "parent",
                 "assigns", "step_calls", "own_step")

    def __init__(self, node: ast.AST, parent: LoopFacts | None) -> None:
        self.node = node
        self.parent = parent
        self.assigned: set[str] = set()
        self.backward: list[ast.Call] = []
        self.grad_calls: list[ast.Call] = []
        self.step = False
        self.step_calls: list[ast.Call] = []
        self.zero_grad = False
        #: ``backward()`` or an optimizer step in the body itself, not only in a nested loop
        #: (an epoch loop around a batch loop trains, but runs once per epoch)
        self.own_step = False
        #: plain (re)bindings in the body: (key, value or None for loop/with targets)
        self.assigns: list[tuple[str, ast.expr | None]] = []

    def resets(self, key: str) -> bool:
        """Whether the body re-binds ``key`` to a value that does not build on itself
        (``acc = 0`` resets; ``acc += x``, ``acc = acc + x``, ``xs.append(x)`` do not)."""
        for k, value in self.assigns:
            if k == key and (value is None or not mentions(value, key)):
                return True
        return False

    @property
    def training(self) -> bool:
        """A training loop calls ``backward()`` or an optimizer ``step()`` each iteration."""
        return bool(self.backward) or self.step

    @property
    def per_step(self) -> bool:
        """One iteration is one training step: the body itself calls ``backward()`` or
        ``step()`` (not only a loop nested in it)."""
        return self.own_step


class FunctionFacts:
    """Facts about one function (or the module's top level)."""

    def __init__(self) -> None:
        self.loops: dict[int, LoopFacts] = {}
        self.defs: dict[str, list[ast.expr]] = {}
        self.assigned: set[str] = set()
        self.backward_roots: list[ast.expr] = []
        self.backward_calls: list[ast.Call] = []
        self.grad_calls: list[ast.Call] = []
        self.has_step = False
        self.has_zero_grad = False
        self.eval_receivers: set[str] = set()
        self.grad_disabled_keys: set[str] = set()
        #: names stored somewhere that outlives the statement (appended, returned, stored)
        self.escapes: set[str] = set()
        self._callees: set[str] | None = None
        self._names: set[str] | None = None
        self._tensor_names: set[str] | None = None
        self._graph_params: set[str] = set()
        #: the statements of the function (for the lazily computed facts)
        self.body: list[ast.stmt] = []
        #: the function's parameter names (set by the walker)
        self.params: frozenset[str] = frozenset()

    def graph_params(self) -> set[str]:
        """Parameters the function calls ``.backward()`` on and never re-binds with a plain
        assignment: whatever the caller passed, it carries an autograd graph."""
        self.tensor_names()
        return self._graph_params

    def tensor_names(self) -> set[str]:
        """Names a tensor-only method is called on (``loss.backward()``, ``loss.item()``,
        ``out.detach()``): evidence that the name holds a ``torch.Tensor``, not a tuple or
        dict of them. Computed on first use (only rules that offer fixes ask)."""
        if self._tensor_names is None:
            names: set[str] = set()
            differentiated: set[str] = set()
            rebound: set[str] = set()
            stack: list[ast.AST] = list(self.body)
            while stack:
                node = stack.pop()
                t = type(node)
                if isinstance(node, ast.Attribute) and node.attr in TENSOR_ONLY_METHODS and \
                        isinstance(node.value, ast.Name):
                    names.add(node.value.id)
                    if node.attr == "backward":
                        differentiated.add(node.value.id)
                elif t is ast.Assign or t is ast.AnnAssign or t is ast.For or t is ast.With:
                    targets = node.targets if t is ast.Assign else [  # type: ignore[attr-defined]
                        getattr(node, "target", None)] + [
                        i.optional_vars for i in getattr(node, "items", ())]
                    for target in targets:
                        if target is not None:
                            rebound.update(target_keys(target))
                if isinstance(node, _FUNCS):
                    continue
                stack.extend(ast.iter_child_nodes(node))
            self._tensor_names = names
            self._graph_params = (differentiated & self.params) - rebound
        return self._tensor_names

    @property
    def has_backward(self) -> bool:
        return bool(self.backward_calls)

    def _slice(self) -> None:
        callees: set[str] = set()
        names: set[str] = set()
        stack: list[ast.AST] = list(self.backward_roots)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and (
                        func.attr in SCALAR_METHODS or func.attr in NO_GRAPH_METHODS):
                    continue
                if isinstance(func, ast.Attribute) and func.attr in MOVE_METHODS:
                    stack.append(func.value)  # batch.to(device): the batch, not a callee
                    continue
                key = key_of(func)
                if key is not None:
                    if key.endswith(".forward"):
                        key = key[: -len(".forward")]
                    callees.add(key)
                    stack.extend(node.args)
                    stack.extend(kw.value for kw in node.keywords)
                    if isinstance(func, ast.Attribute):
                        stack.append(func.value)
                    continue
            key = key_of(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if key is not None:
                if key not in names:
                    names.add(key)
                    stack.extend(self.defs.get(key, ()))
                if isinstance(node, ast.Attribute):
                    stack.append(node.value)
                continue
            if isinstance(node, _FUNCS):
                continue
            stack.extend(ast.iter_child_nodes(node))
        self._callees, self._names = callees, names

    def backward_callees(self) -> set[str]:
        """Keys of the callables whose results flow into a ``backward()`` call."""
        if self._callees is None:
            self._slice()
        assert self._callees is not None
        return self._callees

    def backward_names(self) -> set[str]:
        """Keys of the names (containers included) whose values reach ``backward()``."""
        if self._names is None:
            self._slice()
        assert self._names is not None
        return self._names


def _backward_roots(call: ast.Call, qualname: Callable[[ast.AST], str | None]
                    ) -> list[ast.expr] | None:
    """The expressions a backward-like call differentiates, or ``None`` if not one."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            recv = key_of(func.value)
            if call.args and recv is not None and last_name(recv) in BACKWARD_CALLERS:
                return [call.args[0]]
            if qualname(func) == "torch.autograd.backward":
                return list(call.args[:1])
            if qualname(func.value) is not None:  # dist_autograd.backward(ctx_id, [loss])
                return list(call.args)
            return [func.value]
        if func.attr == "manual_backward":
            return list(call.args[:1])
    return None


def _own_grad_update(target: ast.AST, value: ast.AST) -> bool:
    """``p -= lr * p.grad`` (or ``p.data -= ...``): a parameter updated from its own grad."""
    if type(target) is ast.Attribute and target.attr == "data":
        target = target.value
    key = key_of(target)
    if key is None:
        return False
    for sub in ast.walk(value):
        if type(sub) is ast.Attribute and sub.attr == "grad" and key_of(sub.value) == key:
            return True
    return False


_ACCUMULATE = frozenset({"append", "extend", "insert", "add", "appendleft", "update"})


def gather(body: list[ast.stmt], qualname: Callable[[ast.AST], str | None]) -> FunctionFacts:
    """Walk a function body once (statements only) and return its :class:`FunctionFacts`."""
    facts = FunctionFacts()
    facts.body = body
    loops: list[LoopFacts] = []

    def bind(key: str, value: ast.expr | None, plain: bool = True,
             loop_value: ast.expr | None = None) -> None:
        facts.assigned.add(key)
        if value is not None:
            facts.defs.setdefault(key, []).append(value)
        for loop in loops:
            loop.assigned.add(key)
            if plain:
                loop.assigns.append((key, loop_value))

    def call(node: ast.Call) -> None:
        roots = _backward_roots(node, qualname)
        func = node.func
        if roots is not None:
            facts.backward_roots.extend(roots)
            facts.backward_calls.append(node)
            for loop in loops:
                loop.backward.append(node)
            if loops:
                loops[-1].own_step = True
            return
        if not isinstance(func, ast.Attribute):
            if isinstance(func, ast.Name) and qualname(func) == "torch.autograd.grad":
                _grad(node)
            return
        attr = func.attr
        recv = key_of(func.value)
        if attr == "step":
            name = last_name(recv) if recv else ""
            if OPTIMIZER_NAME.match(name) or (name == "scaler" and node.args):
                facts.has_step = True
                for loop in loops:
                    loop.step = True
                    loop.step_calls.append(node)
                if loops:
                    loops[-1].own_step = True
        elif attr == "zero_grad" or (attr in ("zero_", "detach_") and recv
                                     and recv.endswith(".grad")):
            facts.has_zero_grad = True
            for loop in loops:
                loop.zero_grad = True
        elif attr == "eval" and not node.args and recv:
            facts.eval_receivers.add(recv)
        elif attr in _ACCUMULATE and recv and node.args:
            facts.defs.setdefault(recv, []).extend(node.args)
            for arg in node.args:
                if type(arg) is ast.Name:
                    facts.escapes.add(arg.id)
        elif attr == "requires_grad_" and recv and node.args and isinstance(
                node.args[0], ast.Constant) and node.args[0].value is False:
            facts.grad_disabled_keys.add(recv)
        elif qualname(func) == "torch.autograd.grad":
            _grad(node)

    def _grad(node: ast.Call) -> None:
        facts.grad_calls.append(node)
        for loop in loops:
            loop.grad_calls.append(node)
        outputs = node.args[:1] or [kw.value for kw in node.keywords if kw.arg == "outputs"]
        facts.backward_roots.extend(outputs)

    def stmts(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            stmt(node)

    def stmt(node: ast.stmt) -> None:
        t = type(node)
        if t is ast.Expr:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is ast.Call:
                call(value)
            elif type(value) in (ast.Yield, ast.YieldFrom) and type(value.value) is ast.Name:
                facts.escapes.add(value.value.id)
            elif type(value) is ast.Await and type(value.value) is ast.Call:
                call(value.value)
        elif t is ast.Assign:
            value = node.value  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                if isinstance(target, ast.Attribute) and target.attr == "grad" and isinstance(
                        value, ast.Constant) and value.value is None:
                    facts.has_zero_grad = True
                    for loop in loops:
                        loop.zero_grad = True
                if isinstance(target, ast.Attribute) and target.attr == "requires_grad" and (
                        isinstance(value, ast.Constant) and value.value is False):
                    k = key_of(target.value)
                    if k:
                        facts.grad_disabled_keys.add(k)
                for key in target_keys(target):
                    bind(key, value, True, value)
                if type(value) is ast.Name and type(target) in (ast.Subscript, ast.Attribute):
                    facts.escapes.add(value.id)
            while type(value) is ast.Subscript:
                value = value.value
            if type(value) is ast.Call:
                call(value)
        elif t is ast.AugAssign or t is ast.AnnAssign:
            value = node.value  # type: ignore[attr-defined]
            if t is ast.AugAssign and value is not None and _own_grad_update(
                    node.target, value):  # type: ignore[attr-defined]
                facts.has_step = True  # p -= lr * p.grad: a hand-written optimizer step
                for loop in loops:
                    loop.step = True
                if loops:
                    loops[-1].own_step = True
            for key in target_keys(node.target):  # type: ignore[attr-defined]
                bind(key, value, t is ast.AnnAssign and value is not None, value)
        elif t is ast.For or t is ast.AsyncFor or t is ast.While:
            loop = LoopFacts(node, loops[-1] if loops else None)
            facts.loops[id(node)] = loop
            loops.append(loop)
            if t is not ast.While:
                for key in target_keys(node.target):  # type: ignore[attr-defined]
                    bind(key, node.iter)  # type: ignore[attr-defined]
            stmts(node.body)  # type: ignore[attr-defined]
            loops.pop()
            stmts(node.orelse)  # type: ignore[attr-defined]
        elif t is ast.If:
            stmts(node.body)  # type: ignore[attr-defined]
            stmts(node.orelse)  # type: ignore[attr-defined]
        elif t is ast.With or t is ast.AsyncWith:
            for item in node.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    for key in target_keys(item.optional_vars):
                        bind(key, item.context_expr)
            stmts(node.body)  # type: ignore[attr-defined]
        elif t is ast.Try or t.__name__ == "TryStar":
            stmts(node.body)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                stmts(handler.body)
            stmts(node.orelse)  # type: ignore[attr-defined]
            stmts(node.finalbody)  # type: ignore[attr-defined]
        elif t is ast.Return:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is ast.Name:
                facts.escapes.add(value.id)
            elif type(value) is ast.Tuple:
                facts.escapes.update(e.id for e in value.elts if type(e) is ast.Name)
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.ClassDef:
            bind(node.name, None)  # type: ignore[attr-defined]
        elif t.__name__ == "Match":
            for case in node.cases:  # type: ignore[attr-defined]
                stmts(case.body)
        elif t is ast.Delete:
            for target in node.targets:  # type: ignore[attr-defined]
                for key in target_keys(target):
                    bind(key, None)

    stmts(body)
    return facts
