"""Intra-function data flow: what kind of value each name holds at each statement.

The engine walks a function's statements in order and keeps an environment ``key ->
kind`` (``key`` is a name or an attribute chain such as ``self.hidden``). A kind is a
bit set:

- value kinds, tracked flow-sensitively and joined as *must* facts (a name is a graph
  tensor after an ``if`` only when it is one on both paths): :data:`GRAPH` (a tensor
  carrying autograd history), :data:`LEAF` (a leaf tensor that requires grad: a
  parameter or ``requires_grad=True``), :data:`TENSOR` (a tensor without history);
- type kinds, tracked flow-insensitively: :data:`MODEL` (an ``nn.Module``), :data:`OPTIM`,
  :data:`LOADER`, :data:`PARAMS` (an iterable of parameters), :data:`MODULES`,
  :data:`PINNED` (page-locked data).

:meth:`Flow.kind` evaluates an expression against the environment: ``model(x)`` is a
graph tensor outside ``no_grad`` (``model`` is a module, or a callable whose result reaches
``backward()``), ``loss.item()`` is a plain number, ``out.detach()`` a tensor without
history, ``loss * 2`` whatever its operands are.

Known limitations:
    Calls to functions the linter does not know return "unknown" (kind 0), so a graph
    that passes through a user helper is lost: the rules stay silent rather than guess.
    Loop-carried values are not iterated to a fixed point: a value kind assigned in a
    loop body is unknown at the top of the body.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Union

from torchmem.lint.facts import FunctionFacts, key_of
from torchmem.lint.knowledge import (
    FACTORIES, GRAPH_FREE_BUILTINS, LOADER_NAME, LOSS_NAME, NO_GRAPH_FUNCTIONS,
    NO_GRAPH_METHODS, OPTIMIZER_NAME, PASS_THROUGH_BUILTINS, SCALAR_ATTRS, SCALAR_METHODS,
    VERB_PREFIX, is_model_name, last_name,
)

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = [
    "GRAPH", "LEAF", "TENSOR", "MODEL", "OPTIM", "LOADER", "PINNED", "PARAMS", "MODULES",
    "NAMED", "LOOSE", "UNPINNED", "ACT", "VALUE", "TYPE", "BATCH", "Flow", "Shape", "meet",
]

GRAPH = 1
LEAF = 2
TENSOR = 4
MODEL = 8
OPTIM = 16
LOADER = 32
PINNED = 64
PARAMS = 128
MODULES = 256
NAMED = 512
#: qualifier: a tensor only guessed from the structure of a batch (``for x, y in loader``)
LOOSE = 1024
#: qualifier: a CPU tensor known to be in pageable (not pinned) memory
UNPINNED = 2048
#: qualifier: the graph holds activations of a module's forward pass (not just parameters)
ACT = 4096
VALUE = GRAPH | LEAF | TENSOR | LOOSE | UNPINNED | ACT
TYPE = MODEL | OPTIM | LOADER | PINNED | PARAMS | MODULES | NAMED
#: element of a loader: a tuple target gets (loose) tensors, a single name stays unknown
BATCH = -1
#: element of a loader built without ``pin_memory=True``
BATCH_UNPINNED = -2
#: element of a loader built with ``pin_memory=True``
BATCH_PINNED = -3
_BATCH_ELT = {BATCH: TENSOR | LOOSE, BATCH_UNPINNED: TENSOR | LOOSE | UNPINNED,
              BATCH_PINNED: TENSOR | LOOSE | PINNED}

Shape = Union[int, tuple["Shape", ...]]

_MODULE_SELF = frozenset({
    "to", "cuda", "cpu", "train", "eval", "half", "float", "double", "bfloat16",
    "requires_grad_", "type", "apply", "share_memory", "to_empty", "xpu", "mps",
})
_FORWARD_LIKE = frozenset({
    "forward", "__call__", "encode", "decode", "extract_features", "forward_features",
    "embed", "features",
})
_CONTAINER_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed", "iter", "next", "set",
                                 "dict"})
_TRANSPARENT_ITER = frozenset({"tqdm", "iter", "list", "sorted", "reversed", "islice", "cycle",
                               "track", "progress_bar", "auto", "trange", "tuple"})
_OTHER_NS = frozenset({
    "cuda", "distributed", "backends", "jit", "onnx", "utils", "cpu", "mps", "xpu", "hub",
    "profiler", "amp", "autograd", "random", "testing", "fx", "compiler", "_dynamo", "export",
    "library", "multiprocessing", "overrides", "package", "quantization", "ao", "accelerator",
})


def meet(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Join two environments at a merge point: value kinds must hold on both paths."""
    out: dict[str, int] = {}
    for key in a.keys() | b.keys():
        va, vb = a.get(key, 0), b.get(key, 0)
        v = (va & vb & VALUE) | ((va | vb) & TYPE)
        if v:
            out[key] = v
    return out


def _flatten(shape: Shape) -> int:
    if isinstance(shape, tuple):
        out = 0
        for s in shape:
            out |= _flatten(s)
        return out
    return _BATCH_ELT.get(shape, shape)


def _const_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _const_false(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _kwarg(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


class Flow:
    """The environment of one function and the evaluator of expression kinds.

    Args:
        ctx: the engine context (import resolution, ``no_grad`` state, class facts).
        facts: the function's pre-gathered facts (backward slice).
        env: initial environment (parameters, enclosing scope's type kinds).
    """

    __slots__ = ("ctx", "facts", "env")

    def __init__(self, ctx: Context, facts: FunctionFacts, env: dict[str, int]) -> None:
        self.ctx = ctx
        self.facts = facts
        self.env = env

    # -- evaluation ---------------------------------------------------------------
    def derive(self, kind: int) -> int:
        """Kind of the result of a differentiable op on operands of ``kind``."""
        if kind & (GRAPH | LEAF):
            return TENSOR if self.ctx.no_grad else GRAPH | (kind & ACT)
        return kind & TENSOR

    def forward(self) -> int:
        """Kind of a module's output at the current point."""
        return TENSOR if self.ctx.no_grad else GRAPH | ACT

    def kind(self, node: ast.AST) -> int:
        """The kind of the value of expression ``node`` at the current point."""
        t = type(node)
        if t is ast.Name:
            return self.env.get(node.id, 0)  # type: ignore[attr-defined]
        if t is ast.Attribute:
            return self._attribute(node)  # type: ignore[arg-type]
        if t is ast.Call:
            return self._call(node)  # type: ignore[arg-type]
        if t is ast.Subscript:
            sl = node.slice  # type: ignore[attr-defined]
            base = self.kind(node.value)  # type: ignore[attr-defined]
            if isinstance(sl, ast.Constant) and isinstance(sl.value, str) and not base & VALUE:
                return 0
            return (GRAPH if base & (GRAPH | LEAF) else 0) | (base & (TENSOR | ACT | LOOSE)) | (
                base & (PARAMS | MODULES))
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
            out = 0
            for elt in node.elts:  # type: ignore[attr-defined]
                out |= self.kind(elt)
            return out & VALUE
        if t is ast.Dict:
            out = 0
            for v in node.values:  # type: ignore[attr-defined]
                if v is not None:
                    out |= self.kind(v)
            return out & VALUE
        if t is ast.ListComp or t is ast.GeneratorExp or t is ast.SetComp:
            return self._comprehension(node.generators, node.elt)  # type: ignore[attr-defined]
        if t is ast.DictComp:
            return self._comprehension(node.generators, node.value)  # type: ignore[attr-defined]
        if t is ast.Starred or t is ast.Await or t is ast.NamedExpr:
            return self.kind(node.value)  # type: ignore[attr-defined]
        return 0

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
            return TENSOR if base & VALUE else 0
        if attr in ("T", "mT", "H", "mH", "real", "imag"):
            return self.derive(base)
        if base & MODEL and attr in ("weight", "bias"):
            return LEAF
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
        func = node.func
        ctx = self.ctx
        tf = type(func)
        if tf is ast.Attribute:
            qual = ctx.qualname(func)
            if qual is not None:
                return self._qualified(qual, node)
            attr = func.attr  # type: ignore[attr-defined]
            if attr in SCALAR_METHODS:
                return 0
            if attr in NO_GRAPH_METHODS:
                return TENSOR
            recv_node = func.value  # type: ignore[attr-defined]
            recv = self.kind(recv_node)
            if recv & MODEL:
                if attr in _FORWARD_LIKE:
                    return self.forward()
                if attr in _MODULE_SELF:
                    return recv & TYPE
                if attr == "parameters":
                    return PARAMS
                if attr == "named_parameters":
                    return PARAMS | NAMED
                if attr in ("modules", "children"):
                    return MODULES
                if attr in ("named_modules", "named_children"):
                    return MODULES | NAMED
                return 0
            if recv & VALUE:
                if attr == "pin_memory":
                    return TENSOR | PINNED
                if attr in ("to", "cuda", "cpu") and not recv & (GRAPH | LEAF):
                    return TENSOR
                if attr.endswith("_") and not attr.startswith("_"):
                    return recv & VALUE
                return self.derive(recv)
            if recv & (OPTIM | LOADER | PARAMS | MODULES):
                return 0
            key = key_of(func)
            if key is not None:
                return self._named_callee(key, attr, recv_node, node)
            return 0
        if tf is ast.Name:
            name = func.id  # type: ignore[attr-defined]
            qual = ctx.qualname(func)
            if qual is not None:
                return self._qualified(qual, node)
            known = self.env.get(name, 0)
            if known & MODEL:
                return self.forward()
            if name in GRAPH_FREE_BUILTINS:
                return 0
            if name in PASS_THROUGH_BUILTINS:
                kinds = self._args_kind(node)
                if name in _CONTAINER_BUILTINS:
                    return kinds
                return self.derive(kinds)
            if name in ctx.module_classes:
                return MODEL
            if name == "self" and ctx.in_module_class:
                return self.forward()
            return self._named_callee(name, name, None, node)
        return 0

    def _named_callee(self, key: str, last: str, recv: ast.expr | None, node: ast.Call) -> int:
        """Kind of ``key(...)`` for a callee the linter knows only by name."""
        if key.endswith(".forward"):
            key = key[:-8]
            last = last_name(key)
        if self.ctx.class_attrs and key.startswith("self.") and key.count(".") == 1:
            if self.ctx.class_attrs.get(last, 0) & MODEL:
                return self.forward()
        if key in self.facts.backward_callees():
            return self.forward()
        if key.count(".") <= 1 and is_model_name(last):
            return self.forward()
        if VERB_PREFIX.match(last):
            return 0
        if LOSS_NAME.search(last):
            return self.derive(self._args_kind(node))
        if last == "from_pretrained" and recv is not None:
            owner = last_name(key_of(recv) or "")
            if "Model" in owner or "For" in owner:
                return MODEL
        return 0

    def _qualified(self, qual: str, node: ast.Call) -> int:
        """Kind of a call to an imported (resolved) function or class."""
        parts = qual.split(".")
        root, last = parts[0], parts[-1]
        if root != "torch":
            if root in ("torchvision", "timm") and ("models" in parts or last == "create_model"):
                return MODEL
            if root == "transformers" and last == "from_pretrained" and len(parts) >= 2 and (
                    "Model" in parts[-2] or "For" in parts[-2]):
                return MODEL
            if last == "checkpoint" and "checkpoint" in parts:
                return self.derive(self._args_kind(node)) or self.forward()
            return 0
        sub = parts[1] if len(parts) > 2 else ""
        upper = last[:1].isupper()
        if sub == "nn" and upper:
            if last == "Parameter":
                rg = _kwarg(node, "requires_grad")
                if rg is None and len(node.args) > 1:
                    rg = node.args[1]
                return TENSOR if _const_false(rg) else LEAF
            if "utils" in parts or "functional" in parts or "init" in parts:
                return 0
            return MODEL
        if sub == "optim":
            if not upper or "lr_scheduler" in parts:
                return 0
            if last == "AveragedModel":
                return MODEL
            return OPTIM
        if last == "DataLoader":
            pin = _kwarg(node, "pin_memory")
            if _const_true(pin):
                return LOADER | PINNED
            if pin is None and any(kw.arg is None for kw in node.keywords):
                return LOADER
            return LOADER | (UNPINNED if pin is None or _const_false(pin) else 0)
        if last in ("checkpoint", "checkpoint_sequential") and "checkpoint" in parts:
            return self.forward()
        if qual == "torch.autograd.grad":
            return GRAPH if _const_true(_kwarg(node, "create_graph")) and not self.ctx.no_grad \
                else TENSOR
        if qual == "torch.compile":
            return self.kind(node.args[0]) & TYPE if node.args else 0
        if last in FACTORIES and sub in ("", "random"):
            if _const_true(_kwarg(node, "requires_grad")):
                return LEAF
            if _const_true(_kwarg(node, "pin_memory")):
                return TENSOR | PINNED
            if _kwarg(node, "device") is None and last in ("zeros", "ones", "empty", "full",
                                                            "rand", "randn", "tensor", "arange"):
                return TENSOR | UNPINNED
            return TENSOR
        if last in NO_GRAPH_FUNCTIONS:
            return TENSOR
        if sub in _OTHER_NS:
            return 0
        if upper:
            return TENSOR if last.endswith("Tensor") else 0
        return self.derive(self._args_kind(node)) or TENSOR

    def is_forward(self, call: ast.Call, strict: bool = False) -> bool:
        """Whether ``call`` runs a module's forward pass (``model(x)``, ``self.net(x)``).

        With ``strict``, only modules known by type or by conventional name count, not
        callables known only because their result reaches ``backward()``.
        """
        slice_ = set() if strict else self.facts.backward_callees()
        func = call.func
        tf = type(func)
        if tf is ast.Name:
            name = func.id  # type: ignore[attr-defined]
            if self.ctx.qualname(func) is not None:
                return False
            if self.env.get(name, 0) & MODEL or (name == "self" and self.ctx.in_module_class):
                return True
            return name in slice_ or is_model_name(name)
        if tf is not ast.Attribute or self.ctx.qualname(func) is not None:
            return False
        attr = func.attr  # type: ignore[attr-defined]
        recv = self.kind(func.value)  # type: ignore[attr-defined]
        if recv & MODEL:
            return attr in _FORWARD_LIKE
        if recv & VALUE:
            return False
        key = key_of(func)
        if key is None:
            return False
        if key.endswith(".forward"):
            key = key[:-8]
        if self.env.get(key, 0) & MODEL:
            return True
        last = last_name(key)
        if self.ctx.class_attrs and key.startswith("self.") and key.count(".") == 1 and (
                self.ctx.class_attrs.get(last, 0) & MODEL):
            return True
        return key in slice_ or (key.count(".") <= 1 and is_model_name(last))

    # -- iteration and binding ------------------------------------------------------
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
                return (0, self.kind(func.value) & VALUE)
            if name == "values" and type(func) is ast.Attribute:
                return self.kind(func.value) & VALUE
        kind = self.kind(node)
        if kind & LOADER or self.is_loader(node):
            if kind & PINNED:
                return BATCH_PINNED
            return BATCH_UNPINNED if kind & UNPINNED else BATCH
        if kind & PARAMS:
            return (0, LEAF) if kind & NAMED else LEAF
        if kind & MODULES:
            return (0, MODEL) if kind & NAMED else MODEL
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
            kind = 0 if isinstance(shape, int) and shape < 0 else _flatten(shape)
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
                each: Shape = _flatten(shape)
                for elt in elts:
                    self.bind(elt, each)
        elif t is ast.Starred:
            self.bind(target.value, shape)  # type: ignore[attr-defined]
        elif t is ast.Subscript:
            key = key_of(target.value)  # type: ignore[attr-defined]
            if key is not None:
                kind = _flatten(shape) & VALUE
                if kind & (GRAPH | LEAF):
                    self.env[key] = self.env.get(key, 0) | GRAPH

    def initial_kind(self, name: str, annotation: ast.expr | None) -> int:
        """Kind of a parameter from its annotation or, failing that, its name."""
        if annotation is not None:
            text = ast.unparse(annotation) if not isinstance(annotation, (ast.Name, ast.Attribute)) \
                else (key_of(annotation) or "")
            tail = text.rpartition(".")[2]
            if tail in ("Module", "Sequential", "ModuleDict", "ModuleList") or tail.endswith("Model"):
                return MODEL
            if tail in ("Optimizer",):
                return OPTIM
            if tail == "DataLoader":
                return LOADER
        if OPTIMIZER_NAME.match(name):
            return OPTIM
        if is_model_name(name):
            return MODEL
        if LOADER_NAME.search(name):
            return LOADER
        return 0


def _keys(target: ast.AST) -> list[str]:
    from torchmem.lint.facts import target_keys

    return list(target_keys(target))
