"""TMM110, TMM111: standard-library helpers that remember everything they are given.

Part of the TMM1xx family (memory kept alive longer than needed). Two helpers of the
standard library keep a reference to what passes through them, by design:

* ``itertools.cycle(iterable)`` saves a copy of every element of its first pass so that it
  can repeat them (the documentation says so and gives the equivalent code). Over a
  ``DataLoader`` or a ``Dataset`` that is every batch or sample of the epoch, held for as
  long as the cycle object lives: the memory of a whole epoch of batches, with whatever
  device tensors a collate function made.
* ``functools.lru_cache`` and ``functools.cache`` keep every argument tuple they have seen
  (up to ``maxsize``) as a dictionary key, and every result. On a method, ``self`` is one
  of the arguments; on a function given a model or a tensor, so is the model or the tensor
  (tensors hash by identity, so each new one is a new entry). Those objects can then never
  be freed, even after the program has dropped every other reference to them.

Read from the file alone (no torch): the loader or dataset is known from the data flow
(``DataLoader(...)``, a ``*loader`` name) or from a ``*Dataset`` constructor; a module from
the class (an ``nn.Module`` subclass of the file), an annotation, a model-like name or a
module method called on the parameter.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from torchmem.lint.dataflow import LOADER
from torchmem.lint.facts import key_of
from torchmem.lint.knowledge import last_name
from torchmem.lint.registry import Rule, register

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.context import Context, FunctionState

__all__ = ["CycleKeepsBatches", "CacheKeepsArguments"]

_CYCLE = frozenset({"itertools.cycle"})
_CACHES = frozenset({"functools.lru_cache", "functools.cache"})
#: wrappers that hand their argument's elements through unchanged
_WRAPPERS = frozenset({"iter", "tqdm", "enumerate"})
#: constructor names whose instances yield batches or samples
_DATA_SUFFIXES = ("Dataset", "DataLoader", "Loader")
#: names of a data loader or a dataset when no construction is in sight (not ``batches``
#: or ``*_iter``: a list of prepared batches costs nothing more when cycled)
_LOADER_NAME = re.compile(r"(loader|^dl|_dl)$")
_DATASET_NAME = re.compile(r"dataset$")
#: methods that only a module has: calling one on a parameter says it is a module
_MODULE_METHODS = frozenset({"parameters", "named_parameters", "modules", "named_modules",
                             "children", "named_children", "state_dict", "buffers",
                             "named_buffers", "register_forward_hook"})
#: annotations of a module or a tensor
_HEAVY_TYPES = frozenset({"Module", "Tensor", "Parameter", "PreTrainedModel",
                          "LightningModule"})


def _unwrap(node: ast.expr) -> ast.expr:
    """The iterable under ``iter(...)``, ``tqdm(...)``, ``enumerate(...)``."""
    while type(node) is ast.Call and node.args and type(node.func) in (ast.Name, ast.Attribute):
        name = node.func.id if type(node.func) is ast.Name else node.func.attr  # type: ignore[union-attr]
        if name not in _WRAPPERS:
            break
        node = node.args[0]
    return node


def _data_constructor(value: ast.AST) -> bool:
    """Whether ``value`` is a call of a ``*Dataset``/``*DataLoader``/``*Loader`` class."""
    if type(value) is not ast.Call:
        return False
    name = last_name(key_of(value.func) or "")  # type: ignore[attr-defined]
    return name[:1].isupper() and name.endswith(_DATA_SUFFIXES)


def _batches(node: ast.expr, ctx: Context) -> str | None:
    """What ``node`` iterates over when it yields a data set's batches or samples:
    ``"data loader"``, ``"dataset"``, or None."""
    node = _unwrap(node)
    if _data_constructor(node):
        return "dataset" if last_name(key_of(node.func) or "").endswith("Dataset") else \
            "data loader"  # type: ignore[attr-defined]
    key = key_of(node)
    if key is None:
        return None
    flow = ctx.fn.flow if ctx.fn is not None else None
    if flow is not None and flow.env.get(key, 0) & LOADER:
        return "data loader"
    scope = ctx.fn.node if ctx.fn is not None else None
    for stmt in ast.walk(scope) if scope is not None else ():
        if type(stmt) is ast.Assign and any(key_of(t) == key for t in stmt.targets) and \
                _data_constructor(stmt.value):
            return "dataset" if last_name(key_of(stmt.value.func) or "").endswith(  # type: ignore[attr-defined]
                "Dataset") else "data loader"
    name = last_name(key).lower()
    if _DATASET_NAME.search(name):
        return "dataset"
    return "data loader" if _LOADER_NAME.search(name) else None


def _shadowed(func: ast.expr, ctx: Context) -> bool:
    """Whether a bare imported name is redefined by the enclosing function
    (``def cycle(seq): ...`` in the function's body)."""
    if type(func) is not ast.Name or ctx.fn is None or type(ctx.fn.node) is ast.Module:
        return False
    return any(type(n) in (ast.FunctionDef, ast.AsyncFunctionDef) and n.name == func.id
               for n in ast.walk(ctx.fn.node) if n is not ctx.fn.node)


@register
class CycleKeepsBatches(Rule):
    """``itertools.cycle()`` over a data loader or a dataset.

    What:
        Flags ``itertools.cycle(x)`` (however ``cycle`` is imported) when ``x`` is a data
        loader (built with ``DataLoader(...)`` or a ``*Loader`` class, returned by a function
        of the file that builds one, or named ``*loader``, ``dl``, ``*_dl``), a dataset
        (built with a ``*Dataset`` class or named ``*dataset``), or ``iter()`` of one.

    Why:
        ``cycle`` saves every element of its first pass in a list so that it can repeat
        them: over a loader, every batch of the epoch, over a dataset every sample, all
        alive until the cycle object is dropped. Memory grows through the whole first
        epoch (an out-of-memory error on a large data set), and from the second pass on
        the batches repeat in the same order, so a shuffling loader no longer shuffles.

    Known problems:
        A name is taken as a loader or a dataset by its spelling when no construction of
        it is in sight. The batches are kept as they are yielded: a cycle used for a few
        warm-up batches keeps only those. A small in-memory data set costs little more
        than it already did, but the order still repeats.

    Example:
        ```python
        import itertools

        def train(model, loader, steps):
            batches = itertools.cycle(loader)
            for _ in range(steps):
                model(next(batches))
        ```

    Use instead:
        ```python
        def forever(loader):
            while True:
                yield from loader

        def train(model, loader, steps):
            batches = forever(loader)
            for _ in range(steps):
                model(next(batches))
        ```
    """

    code = "TMM110"
    name = "cycle-keeps-batches"
    summary = "itertools.cycle() over a data loader or dataset keeps every batch it yields"
    call_tails = frozenset({"cycle"})

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not node.args or ctx.qualname(func) not in _CYCLE or _shadowed(func, ctx):
            return
        what = _batches(node.args[0], ctx)
        if what is None:
            return
        ctx.report(self, node, (
            f"itertools.cycle() saves every element of its first pass to repeat them: over "
            f"this {what} it keeps every {'sample' if what == 'dataset' else 'batch'} it has "
            f"yielded alive, up to a whole epoch (and repeats them in the same order); loop "
            f"over it again instead "
            f"(a generator: while True: yield from {ast.unparse(_unwrap(node.args[0]))})"))


def _cache_decorator(dec: ast.expr, ctx: Context, local: frozenset[str]) -> bool:
    """Whether ``dec`` is ``lru_cache``/``cache`` (called or not), or a decorator of this file
    whose body applies one (``def cached(...): ... lru_cache(...)(func)``)."""
    target = dec.func if type(dec) is ast.Call else dec
    if ctx.qualname(target) in _CACHES:
        return True
    return type(target) is ast.Name and target.id in local


def _local_cache_decorators(ctx: Context) -> frozenset[str]:
    """Names of the file's top-level functions that apply ``lru_cache``/``cache``."""
    memo = ctx.scratch.get("memoizers.local")
    if memo is None:
        names = set()
        for stmt in getattr(ctx.tree, "body", ()):
            if type(stmt) is ast.FunctionDef and any(
                    type(n) is ast.Call and ctx.qualname(n.func) in _CACHES
                    for n in ast.walk(stmt)):
                names.add(stmt.name)
        memo = ctx.scratch["memoizers.local"] = frozenset(names)
    return memo


def _module_uses(fn: ast.AST) -> set[str]:
    """Names on which ``fn`` calls a method that only a module has (``m.parameters()``)."""
    return {n.func.value.id for n in ast.walk(fn)  # type: ignore[attr-defined]
            if type(n) is ast.Call and type(n.func) is ast.Attribute and
            n.func.attr in _MODULE_METHODS and type(n.func.value) is ast.Name}


def _passed_modules(name: str, ctx: Context) -> set[int]:
    """Positions of the arguments that calls of ``name`` in this file pass a module at: a
    name on which the calling function calls a module method (``model.state_dict()``)."""
    out: set[int] = set()
    for caller in ast.walk(ctx.tree) if ctx.tree is not None else ():
        if type(caller) not in (ast.FunctionDef, ast.AsyncFunctionDef):
            continue
        uses = None
        for call in ast.walk(caller):
            if type(call) is not ast.Call or last_name(key_of(call.func) or "") != name:
                continue
            if uses is None:
                uses = _module_uses(caller)
            out.update(i for i, a in enumerate(call.args) if type(a) is ast.Name and a.id in uses)
    return out


def _heavy_parameter(fn: ast.FunctionDef | ast.AsyncFunctionDef, skip: int,
                     ctx: Context) -> str | None:
    """The first parameter (after ``skip`` bound ones) that holds a module or a tensor:
    annotated so, used as a module in the body, or given a module by a call of the file.
    A parameter annotated with any other type is not one."""
    positional = fn.args.posonlyargs + fn.args.args
    used_as_module = _module_uses(fn)
    passed: set[int] | None = None
    for i, a in enumerate(positional + fn.args.kwonlyargs):
        if i < skip:
            continue
        if a.annotation is not None:
            if last_name(key_of(a.annotation) or "") in _HEAVY_TYPES:
                return a.arg
            continue
        if a.arg in used_as_module:
            return a.arg
        if i < len(positional):
            if passed is None:
                passed = _passed_modules(fn.name, ctx)
            if i - skip in passed:
                return a.arg
    return None


@register
class CacheKeepsArguments(Rule):
    """``functools.lru_cache``/``cache`` on a module's method or on a function given a model.

    What:
        Flags a function decorated with ``functools.lru_cache`` or ``functools.cache``
        (directly, or through a decorator of the same file that applies one) when it is a
        method of an ``nn.Module`` class of the file (not a ``staticmethod``), or when one
        of its parameters holds a module or a tensor: annotated ``nn.Module``/``Tensor``,
        used as a module in the body (``model.parameters()``, ``model.named_modules()``), or
        given, by a call in the same file, a name on which the caller calls such a method
        (``fqns(model, key)`` in a function that calls ``model.state_dict()``).

    Why:
        The cache keeps every argument tuple it has seen as a dictionary key (up to
        ``maxsize``, 128 by default; without a bound for ``cache``), and the result of
        each call. On a method, ``self`` is an argument: every module instance that ever
        called it stays alive with its parameters, buffers and gradients, even after the
        program deleted it (a loop that builds a model per trial, per fold or per test
        grows by one model each time). A tensor argument hashes by identity, so every new
        tensor is a new entry, kept with the result.

    Known problems:
        Off by default (on trial): the findings on real projects are right, but most are on
        modules built once per program (a cached ``num_frames()`` of a model), where
        keeping the instance costs nothing; the rule cannot tell how often instances are
        made. Callers in other files are not read, and a parameter with an annotation of
        another type is never taken for a module.

    Example:
        ```python
        import functools
        import torch.nn as nn

        @functools.lru_cache(maxsize=None)
        def parameter_names(model):
            return [name for name, _ in model.named_parameters()]
        ```

    Use instead:
        ```python
        import torch.nn as nn

        def parameter_names(model):
            return [name for name, _ in model.named_parameters()]
        ```
    """

    code = "TMM111"
    name = "cache-keeps-arguments"
    summary = "lru_cache/cache on a module's method or a function given a model keeps them alive"
    default_enabled = False
    trial = True

    def enter_function(self, state: FunctionState, ctx: Context) -> None:
        fn = state.node
        if type(fn) not in (ast.FunctionDef, ast.AsyncFunctionDef) or \
                not fn.decorator_list:  # type: ignore[attr-defined]
            return
        decorators = fn.decorator_list  # type: ignore[attr-defined]
        local = _local_cache_decorators(ctx)
        dec = next((d for d in decorators if _cache_decorator(d, ctx, local)), None)
        if dec is None:
            return
        names = {key_of(d.func if type(d) is ast.Call else d) for d in decorators}
        static = "staticmethod" in names
        method = state.class_name is not None and not static
        if method and ctx.in_module_class and "classmethod" not in names:
            ctx.report(self, dec, (
                f"the cache on '{state.name}' keeps 'self', a module, as part of every key: "
                f"each instance that calls it stays alive with its parameters after the "
                f"program drops it; cache the computation in a function of plain values "
                f"(sizes, dtypes) instead"))
            return
        heavy = _heavy_parameter(fn, 1 if method else 0, ctx)  # type: ignore[arg-type]
        if heavy is not None:
            ctx.report(self, dec, (
                f"the cache on '{state.name}' keeps its argument '{heavy}' (a module or a "
                f"tensor) as part of every key, alive for as long as the cache: a model "
                f"dropped by the program is never freed; cache on plain values (names, "
                f"sizes) or drop the cache"))
