"""Intra-function data flow: what kind of value each name holds at each statement.

The engine walks a function's statements in order and keeps an environment ``key ->
kind`` (``key`` is a name or an attribute chain such as ``self.hidden``). A kind is a
bit set (:mod:`torchmem.lint.kinds`):

- value kinds, tracked flow-sensitively and joined as *must* facts (a name is a graph
  tensor after an ``if`` only when it is one on both paths): :data:`GRAPH` (a value
  carrying autograd history), :data:`LEAF` (a leaf tensor that requires grad: a
  parameter or ``requires_grad=True``), :data:`TENSOR` (a tensor without history; a
  branch that binds a name only to ``None``, or never binds a name bound nowhere else,
  is left out of the join: :mod:`torchmem.lint.joins`), with
  the qualifiers :data:`TYPED` (known to be a ``torch.Tensor`` itself) and
  :data:`CONTAINER` (a list/tuple/dict literal holding such values);
- type kinds, tracked flow-insensitively: :data:`MODEL` (an ``nn.Module``), :data:`OPTIM`,
  :data:`LOADER`, :data:`PARAMS` (an iterable of parameters), :data:`MODULES`,
  :data:`PINNED` (page-locked data).

A value is graph-carrying only with evidence: a module's forward pass, a tensor op on a
graph-carrying or grad-requiring operand, a criterion, or the summary of a function of the
same file that returns one (:mod:`torchmem.lint.summaries`). ``batch.to(device)`` on a
value of unknown type stays unknown, and so do its attributes (``batch.num_graphs``).

:meth:`Flow.kind` evaluates an expression against the environment: ``model(x)`` is a
graph tensor outside ``no_grad`` (``model`` is a module, or a callable whose result reaches
``backward()``), ``loss.item()`` is a plain number, ``out.detach()`` a tensor without
history, ``loss * 2`` whatever its operands are.

Known limitations:
    Calls to anything :mod:`torchmem.lint.summaries` cannot resolve (classes of other
    files, installed packages, callbacks) return "unknown" (kind 0), so a graph that
    passes through such a helper is lost: the rules stay silent rather than guess.
    Loop-carried values are not iterated to a fixed point: a value kind assigned in a
    loop body is unknown at the top of the body.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.callbacks import GIVEN_GRAPHS
from torchmem.lint.calls import call_kind, is_forward
from torchmem.lint.facts import FunctionFacts, key_of, target_keys
from torchmem.lint.kinds import (
    ACT,
    BATCH,
    BATCH_PINNED,
    BATCH_UNPINNED,
    CONTAINER,
    GRAPH,
    LEAF,
    LOADER,
    LOOSE,
    MODEL,
    MODULES,
    NAMED,
    OPTIM,
    PARAMS,
    PINNED,
    TENSOR,
    TYPE,
    TYPED,
    UNPINNED,
    VALUE,
    Shape,
    flatten,
    held,
    meet,
)
from torchmem.lint.knowledge import (
    LOADER_NAME,
    OPTIMIZER_NAME,
    SCALAR_ATTRS,
    TARGET_NAME,
    is_model_name,
    last_name,
)

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = [
    "GRAPH", "LEAF", "TENSOR", "MODEL", "OPTIM", "LOADER", "PINNED", "PARAMS", "MODULES",
    "NAMED", "LOOSE", "UNPINNED", "ACT", "TYPED", "CONTAINER", "VALUE", "TYPE", "BATCH",
    "BATCH_UNPINNED", "BATCH_PINNED", "Flow", "Shape", "meet",
]

_TRANSPARENT_ITER = frozenset({"tqdm", "iter", "list", "sorted", "reversed", "islice", "cycle",
                               "track", "progress_bar", "auto", "trange", "tuple"})


class Flow:
    """The environment of one function and the evaluator of expression kinds.

    Args:
        ctx: the engine context (import resolution, ``no_grad`` state, class facts).
        facts: the function's pre-gathered facts (backward slice).
        env: initial environment (parameters, enclosing scope's type kinds).
    """

    __slots__ = ("ctx", "facts", "env", "instances")

    def __init__(self, ctx: Context, facts: FunctionFacts, env: dict[str, int]) -> None:
        self.ctx = ctx
        self.facts = facts
        self.env = env
        #: names bound to an instance of a class of this file (``meter = Metric()``)
        self.instances: dict[str, str] = {}

    # -- evaluation ---------------------------------------------------------------
    def derive(self, kind: int) -> int:
        """Kind of the result of a differentiable op on operands of ``kind``."""
        if kind & (GRAPH | LEAF):
            return TENSOR | TYPED if self.ctx.no_grad else GRAPH | TYPED | (kind & ACT)
        return TENSOR | TYPED if kind & TENSOR else 0

    def forward(self) -> int:
        """Kind of a module's output at the current point."""
        return TENSOR if self.ctx.no_grad else GRAPH | ACT

    def kind(self, node: ast.AST) -> int:
        """The kind of the value of expression ``node`` at the current point."""
        t = type(node)
        if t is ast.Name:
            kind = self.env.get(node.id, 0)  # type: ignore[attr-defined]
            if not kind and self.facts.params and node.id in self.facts.graph_params():  # type: ignore[attr-defined]
                return GRAPH | TYPED  # a parameter the function calls backward() on
            if kind & (GRAPH | TENSOR) and not kind & (TYPED | CONTAINER) and \
                    node.id in self.facts.tensor_names():  # type: ignore[attr-defined]
                return kind | TYPED  # loss.backward() / loss.item() elsewhere: a tensor
            return kind
        if t is ast.Attribute:
            return self._attribute(node)  # type: ignore[arg-type]
        if t is ast.Call:
            return self._call(node)  # type: ignore[arg-type]
        if t is ast.Subscript:
            sl = node.slice  # type: ignore[attr-defined]
            base = self.kind(node.value)  # type: ignore[attr-defined]
            if isinstance(sl, ast.Constant) and isinstance(sl.value, str) and not base & VALUE:
                return 0
            if base & CONTAINER:  # an element of a list/tuple/dict literal
                return base & ~CONTAINER & (VALUE | PARAMS | MODULES)
            return (GRAPH if base & (GRAPH | LEAF) else 0) | (
                base & (TENSOR | ACT | LOOSE | TYPED)) | (base & (PARAMS | MODULES))
        if t is ast.BinOp:
            return self.derive(self.kind(node.left) | self.kind(node.right))  # type: ignore[attr-defined]
        if t is ast.UnaryOp:
            if isinstance(node.op, ast.Not):  # type: ignore[attr-defined]
                return 0
            return self.derive(self.kind(node.operand))  # type: ignore[attr-defined]
        if t is ast.IfExp:
            a = self.kind(node.body)  # type: ignore[attr-defined]
            b = self.kind(node.orelse)  # type: ignore[attr-defined]
            return (a & b & VALUE) | ((a | b) & TYPE)
        if t is ast.Tuple or t is ast.List or t is ast.Set:
            return self._container(node.elts)  # type: ignore[attr-defined]
        if t is ast.Dict:
            return self._container(node.values)  # type: ignore[attr-defined]
        if t is ast.ListComp or t is ast.GeneratorExp or t is ast.SetComp:
            return held(self._comprehension(node.generators, node.elt))  # type: ignore[attr-defined]
        if t is ast.DictComp:
            return held(self._comprehension(node.generators, node.value))  # type: ignore[attr-defined]
        if t is ast.Starred or t is ast.Await or t is ast.NamedExpr:
            return self.kind(node.value)  # type: ignore[attr-defined]
        return 0

    def _container(self, elts: list[ast.expr | None]) -> int:
        """Kind of a list/tuple/set/dict literal: holds its elements' values, is no tensor
        (it is :data:`TYPED` only when every element is a tensor)."""
        out = 0
        typed = TYPED
        for elt in elts:
            if elt is not None:
                k = self.kind(elt)
                out |= k
                typed &= k
        return held(out & ~TYPED | typed) if out & VALUE else 0

    def _comprehension(self, generators: list[ast.comprehension], elt: ast.expr) -> int:
        saved: dict[str, int | None] = {}
        for gen in generators:
            shape = self.elt(gen.iter)
            for key in _keys(gen.target):
                if key not in saved:
                    saved[key] = self.env.get(key)
            self.bind(gen.target, shape)
        out = self.kind(elt)
        for key, value in saved.items():
            if value is None:
                self.env.pop(key, None)
            else:
                self.env[key] = value
        return out & (VALUE | PARAMS | MODULES)

    def _attribute(self, node: ast.Attribute) -> int:
        key = key_of(node)
        if key is not None:
            known = self.env.get(key)
            if known is not None:
                return known
        attr = node.attr
        if attr in SCALAR_ATTRS:
            return 0
        value = node.value
        if type(value) is ast.Name and value.id == "self" and self.ctx.class_attrs:
            known = self.ctx.class_attrs.get(attr)
            if known is not None:
                return known
        base = self.kind(value)
        if attr == "data" or attr == "grad":
            return TENSOR | TYPED if base & VALUE and not base & CONTAINER else 0
        if attr in ("T", "mT", "H", "mH", "real", "imag"):
            return self.derive(base)
        if base & MODEL and attr in ("weight", "bias"):
            return LEAF | TYPED
        if base & GRAPH:  # out.values, outputs.logits, result.last_hidden_state
            return TENSOR if attr == "indices" else base & (GRAPH | ACT)
        return 0

    def _args_kind(self, call: ast.Call) -> int:
        out = 0
        for arg in call.args:
            out |= self.kind(arg)
        for kw in call.keywords:
            out |= self.kind(kw.value)
        return out

    def _call(self, node: ast.Call) -> int:
        return call_kind(self, node)

    def is_forward(self, call: ast.Call, strict: bool = False) -> bool:
        """Whether ``call`` runs a module's forward pass (``model(x)``, ``self.net(x)``);
        see :func:`torchmem.lint.calls.is_forward`."""
        return is_forward(self, call, strict)

    def elt(self, node: ast.AST) -> Shape:
        """The shape of the elements of iterable ``node`` (for ``for`` targets)."""
        if type(node) is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            name = func.id if type(func) is ast.Name else (
                func.attr if type(func) is ast.Attribute else "")
            args = node.args  # type: ignore[attr-defined]
            if name == "enumerate" and args:
                return (0, self.elt(args[0]))
            if name == "zip":
                return tuple(self.elt(a) for a in args)
            if name in _TRANSPARENT_ITER and args:
                return self.elt(args[0])
            if name == "range":
                return 0
            if name == "items" and type(func) is ast.Attribute:
                return (0, self.kind(func.value) & VALUE & ~CONTAINER)
            if name == "values" and type(func) is ast.Attribute:
                return self.kind(func.value) & VALUE & ~CONTAINER
        kind = self.kind(node)
        if kind & LOADER or self.is_loader(node):
            if kind & PINNED:
                return BATCH_PINNED
            return BATCH_UNPINNED if kind & UNPINNED else BATCH
        if kind & PARAMS:
            return (0, LEAF | TYPED) if kind & NAMED else LEAF | TYPED
        if kind & MODULES:
            return (0, MODEL) if kind & NAMED else MODEL
        if kind & CONTAINER:  # for p in [w, b]: the elements themselves
            return kind & VALUE & ~CONTAINER
        if kind & (GRAPH | LEAF):
            return GRAPH | (kind & ACT)
        return kind & TENSOR

    def is_loader(self, node: ast.AST) -> bool:
        """Whether ``node`` (or what it wraps) is an iterable of batches."""
        while type(node) is ast.Call and node.args:  # type: ignore[attr-defined]
            func = node.func  # type: ignore[attr-defined]
            name = func.id if type(func) is ast.Name else (
                func.attr if type(func) is ast.Attribute else "")
            if name not in ("enumerate", "zip") and name not in _TRANSPARENT_ITER:
                break
            node = node.args[0]  # type: ignore[attr-defined]
        key = key_of(node)
        if key is None:
            return False
        return bool(self.env.get(key, 0) & LOADER) or bool(LOADER_NAME.search(last_name(key)))

    def bind(self, target: ast.AST, shape: Shape) -> None:
        """Bind an assignment or loop target to a value of ``shape``."""
        t = type(target)
        if t is ast.Name or t is ast.Attribute:
            key = key_of(target)
            if key is None:
                return
            kind = 0 if isinstance(shape, int) and shape < 0 else flatten(shape)
            if kind:
                self.env[key] = kind
            else:
                self.env.pop(key, None)
        elif t is ast.Tuple or t is ast.List:
            elts = target.elts  # type: ignore[attr-defined]
            if isinstance(shape, tuple) and len(shape) == len(elts):
                for elt, sub in zip(elts, shape):
                    self.bind(elt, sub)
            else:
                each: Shape = flatten(shape) & ~CONTAINER
                given = each & GRAPH and self.ctx.scratch.get(GIVEN_GRAPHS)
                for elt in elts:
                    if given and type(elt) is ast.Name and TARGET_NAME.match(elt.id):  # type: ignore[attr-defined]
                        # y_pred, y = output of a metric's update(output: tuple[Tensor,
                        # Tensor]): the target of the pair is data, not a graph
                        self.bind(elt, (each & ~(GRAPH | ACT)) | TENSOR)
                        continue
                    self.bind(elt, each)
        elif t is ast.Starred:
            self.bind(target.value, shape)  # type: ignore[attr-defined]
        elif t is ast.Subscript:
            key = key_of(target.value)  # type: ignore[attr-defined]
            if key is not None:
                kind = flatten(shape) & VALUE
                if kind & (GRAPH | LEAF):
                    self.env[key] = self.env.get(key, 0) | GRAPH
                elif self._differentiated(target):
                    # output['loss'] = output['loss'].detach(): the entry whose graph
                    # backward() used is replaced by a detached value, so what the rest
                    # of the function keeps of ``output`` no longer holds that graph
                    old = self.env.get(key, self.kind(target.value))  # type: ignore[attr-defined]
                    if old & ~(GRAPH | ACT):
                        self.env[key] = old & ~(GRAPH | ACT)
                    else:
                        self.env.pop(key, None)

    def _differentiated(self, target: ast.AST) -> bool:
        """Whether ``target`` (``output['loss']``) is an expression this function calls
        ``backward()`` on."""
        roots = self.facts.backward_roots
        if not roots:
            return False
        text = ast.dump(target, annotate_fields=False, include_attributes=False).replace(
            "Store()", "Load()")
        return any(ast.dump(r, annotate_fields=False, include_attributes=False) == text
                   for r in roots)

    def initial_kind(self, name: str, annotation: ast.expr | None) -> int:
        """Kind of a parameter from its annotation or, failing that, its name."""
        if annotation is not None:
            t = type(annotation)
            # a subscript (``Optional[nn.Module]``) or a string ends in "]" or a quote, which
            # no tail below matches: only names, attributes and ``A | B`` can
            text = (key_of(annotation) or "") if t is ast.Name or t is ast.Attribute else \
                "" if t is ast.Subscript or t is ast.Constant else ast.unparse(annotation)
            tail = text.rpartition(".")[2]
            if tail in ("Module", "Sequential", "ModuleDict", "ModuleList") or tail.endswith("Model"):
                return MODEL
            if tail in ("Optimizer",):
                return OPTIM
            if tail == "DataLoader":
                return LOADER
        kind = _NAME_KINDS.get(name)
        if kind is None:  # the same parameter names again and again: remembered
            if len(_NAME_KINDS) >= 50_000:
                _NAME_KINDS.clear()
            kind = _NAME_KINDS[name] = _name_kind(name)
        return kind


#: parameter name -> :func:`_name_kind` (bounded: cleared when full)
_NAME_KINDS: dict[str, int] = {}


def _name_kind(name: str) -> int:
    """Kind of a parameter with no telling annotation, from its name."""
    if OPTIMIZER_NAME.match(name):
        return OPTIM
    if is_model_name(name):
        return MODEL
    if LOADER_NAME.search(name):
        return LOADER
    return 0


def _keys(target: ast.AST) -> list[str]:
    return target_keys(target)  # a new list each call
