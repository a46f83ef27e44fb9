"""Per-function facts gathered once, before the rules run (no torch).

One statement-level pass over a function body (nested functions and methods are their
own scopes and get their own pass; the rest of a class body runs, once, where the class is
defined, and counts there) records, for the function and for every loop in it:
which names are (re)bound, where ``backward()`` / ``autograd.grad`` / ``optimizer.step()``
/ ``zero_grad()`` are called, and the flow-insensitive definitions of each name. From
these (gathered by :func:`torchmem.lint.gather.gather`),
:meth:`FunctionFacts.backward_callees` computes lazily which callables (``model``,
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
import builtins

from torchmem.lint.children import FIELDS, child_nodes, fields, walk
from torchmem.lint.knowledge import (
    MOVE_METHODS,
    NO_GRAPH_METHODS,
    SCALAR_METHODS,
    TENSOR_ONLY_METHODS,
)

__all__ = ["LoopFacts", "FunctionFacts", "key_of", "mentions", "mode_flag", "target_keys"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
#: children :meth:`FunctionFacts.tensor_names` need not visit (no attribute below them)
_LEAVES = frozenset({ast.Name, ast.Constant, type(None)})
#: Python's builtins (``zip``, ``tuple``, ``sum``...): never a model, even when their
#: result reaches ``backward()``
_BUILTINS = frozenset(dir(builtins))


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
    for sub in walk(node):
        if type(sub) is ast.Name or type(sub) is ast.Attribute:
            if key_of(sub) == key:
                return True
    return False


def target_keys(target: ast.AST) -> list[str]:
    """Keys bound by an assignment target (names, attribute chains, tuple elements)."""
    if type(target) is ast.Name:  # most targets: no recursion
        return [target.id]  # type: ignore[attr-defined]
    out: list[str] = []
    _target_keys(target, out)
    return out


def _target_keys(target: ast.AST, out: list[str]) -> None:
    if isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _target_keys(elt, out)
    elif isinstance(target, ast.Starred):
        _target_keys(target.value, out)
    else:
        key = key_of(target)
        if key is not None:
            out.append(key)


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
                 "assigns", "step_calls", "own_step", "ifs", "cond_assigns")

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
        #: ``if`` statements around the loop when it starts (set by the gatherer)
        self.ifs = 0
        #: indices into ``assigns`` of the bindings made under an ``if`` of the body
        self.cond_assigns: set[int] = set()

    def resets(self, key: str) -> bool:
        """Whether the body re-binds ``key`` to a value that does not build on itself
        (``acc = 0`` resets; ``acc += x``, ``acc = acc + x``, ``xs.append(x)`` do not)."""
        for k, value in self.assigns:
            if k == key and (value is None or not mentions(value, key)):
                return True
        return False

    def resets_each_iteration(self, key: str) -> bool:
        """Like :meth:`resets`, counting only the bindings made outside any ``if`` of the
        body: ``running = 0.0`` under ``if i % 100 == 0:`` lets ``running += loss`` keep
        a hundred iterations' values."""
        for i, (k, value) in enumerate(self.assigns):
            if k == key and i not in self.cond_assigns and (
                    value is None or not mentions(value, key)):
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
        #: names given as the mode of ``module.train(flag)`` / ``module.train(mode=flag)``
        self.mode_flags: set[str] = set()
        self.grad_disabled_keys: set[str] = set()
        #: names stored somewhere that outlives the statement (appended, returned, stored)
        self.escapes: set[str] = set()
        self._callees: set[str] | None = None
        self._names: set[str] | None = None
        self._tensor_names: set[str] | None = None
        self._graph_params: set[str] | None = None
        #: keys re-bound by a plain assignment, a ``for`` or a ``with`` target
        self.rebound: set[str] = set()
        #: the statements of the function (for the lazily computed facts)
        self.body: list[ast.stmt] = []
        #: the function's parameter names (set by the walker)
        self.params: frozenset[str] = frozenset()

    def graph_params(self) -> set[str]:
        """Parameters the function calls ``.backward()`` on (in a statement) and never
        re-binds with a plain assignment: whatever the caller passed, it carries an
        autograd graph. Read off the gathered facts; no walk."""
        if self._graph_params is None:
            differentiated: set[str] = set()
            if self.params:
                for call in self.backward_calls:
                    func = call.func
                    if type(func) is ast.Attribute and func.attr == "backward" and \
                            type(func.value) is ast.Name:
                        differentiated.add(func.value.id)
            self._graph_params = (differentiated & self.params) - self.rebound
        return self._graph_params

    def tensor_names(self) -> set[str]:
        """Names a tensor-only method is called on (``loss.backward()``, ``loss.item()``,
        ``out.detach()``): evidence that the name holds a ``torch.Tensor``, not a tuple or
        dict of them. Computed on first use (only for names whose kind needs it)."""
        if self._tensor_names is None:
            names: set[str] = set()
            stack: list[ast.AST] = list(self.body)
            pop, push = stack.pop, stack.append
            Attribute, Name = ast.Attribute, ast.Name
            fields_of = FIELDS.get
            while stack:
                node = pop()
                cls = node.__class__
                if cls is Attribute:
                    if node.attr in TENSOR_ONLY_METHODS and \
                            node.value.__class__ is Name:  # type: ignore[attr-defined]
                        names.add(node.value.id)  # type: ignore[attr-defined]
                        continue  # nothing else below: the name itself
                elif cls in _FUNCS:
                    continue
                for name in fields_of(cls) or fields(cls):  # as child_nodes(), inline
                    value = getattr(node, name)
                    if value.__class__ is list:
                        for item in value:
                            if item.__class__ not in _LEAVES:
                                push(item)
                    elif value.__class__ not in _LEAVES:
                        push(value)
            self._tensor_names = names
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
                    if key not in _BUILTINS or key in self.assigned or key in self.params:
                        callees.add(key)  # zip(*xs): a builtin, not a model (xs still counts)
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
            stack.extend(child_nodes(node))
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


def mode_flag(call: ast.Call) -> str | None:
    """``flag`` for ``module.train(flag)`` / ``module.train(mode=flag)`` with a plain name
    as the mode: training mode when the flag is true, evaluation mode when it is false."""
    args = call.args or [kw.value for kw in call.keywords if kw.arg == "mode"]
    if len(args) == 1 and len(call.args) + len(call.keywords) == 1 and type(args[0]) is ast.Name:
        return args[0].id
    return None
