"""In-place safety: will ``t.add_(...)`` work, and will backward still work after it?

Autograd's real rules (verified against torch's own errors by the tests):

* the op itself raises when ``t`` is a leaf that requires grad (under grad mode), a
  view of one, a view returned by a multi-output function (``unbind``, ``split``,
  ``chunk``), a view made under ``no_grad`` of a tensor that requires grad, or an
  inference tensor outside inference mode;
* otherwise the op works, and a later backward raises ("one of the variables needed
  for gradient computation has been modified by an inplace operation") exactly when
  a graph node saved ``t`` (or a view sharing its storage) for backward. An op saves
  what its derivative needs: ``y = x * 2`` saves ``x`` and the scalar, so
  ``y.add_(1)`` is fine; ``y = x.sigmoid()`` saves its *result* ``y``, so
  ``y.add_(1)`` breaks backward. Consumers save their inputs: ``z = y * w`` with ``w``
  requiring grad saves ``y``.

``explain_inplace`` sees the tensor's own node; pass the graph's outputs (the loss) as
``roots`` to also see the consumers. It answers ``safe`` only with that evidence: a
searched graph that reaches the tensor (or, for a tensor that does not require grad,
a searched graph that did not save it); without roots, or with roots whose graphs do
not reach the tensor, the outcome is ``unknown``. ``no_input_mutation`` checks that a
function leaves its tensor inputs alone (version counters).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Iterator, Literal

import torch

from torchmem.collect.graph import saved_names, iter_nodes, saved_tensors, storage_key
from torchmem.errors import InputMutationError, UsageError
from torchmem.model.scope import InplaceVerdict
from torchmem.scope._objects import named_tensors

__all__ = ["explain_inplace", "no_input_mutation", "InputMutationWarning"]

_MULTI_VIEW = ("UnbindBackward", "SplitBackward", "SplitWithSizesBackward")
_FIX_CLONE = "work on a copy: `t = t.clone()` before the in-place op, or use the out-of-place op"
_FIX_ROOTS = (
    "pass the loss (or the outputs) that will be backpropagated, computed from this "
    "tensor: `explain_inplace(t, loss)`"
)


def _name(node: Any) -> str:
    return type(node).__name__


def _version_mismatch(node: Any) -> bool:
    """True when unpacking one of ``node``'s saved tensors fails on a version check."""
    for attr in saved_names(node):
        try:
            getattr(node, attr)
        except RuntimeError as e:
            if "modified by an inplace operation" in str(e):
                return True
        except Exception:  # noqa: BLE001 - exotic saved values
            continue
    return False


def explain_inplace(t: torch.Tensor, *roots: Any) -> InplaceVerdict:
    """Say whether an in-place op on ``t`` is safe now, and why, in autograd's terms.

    Args:
        t: the tensor you want to modify in place.
        *roots: outputs of the graph that will be backpropagated (the loss, or
            ``grad_fn`` nodes), each as its own argument; their graphs are searched
            for nodes that saved ``t``. Without them only ``t``'s own ``grad_fn`` is
            searched, and the answer can be a problem found there but never ``safe``.

    Returns:
        An :class:`~torchmem.model.scope.InplaceVerdict`: ``safe`` only when a searched
        root graph reaches ``t`` (a tensor that does not require grad: when a root graph
        was searched) and nothing saved it; ``unknown`` when that evidence is missing.

    Raises:
        UsageError: ``t`` is not a tensor, or a root is neither a tensor nor a
            ``grad_fn`` node (a list, a string...).

    Example:
        >>> y = x.sigmoid()                                   # doctest: +SKIP
        >>> torchmem.explain_inplace(y).outcome               # doctest: +SKIP
        'error_at_backward'
        >>> z = x * 2; loss = z.sum()                         # doctest: +SKIP
        >>> torchmem.explain_inplace(z, loss).outcome         # doctest: +SKIP
        'safe'

    Known limitations:
        The answer holds for the current grad mode and graph; it says nothing about
        graphs built later. Tensors saved by custom autograd Functions as plain ``ctx``
        attributes are invisible. A ``.data`` alias has its own version counter: writing
        to it never raises but can silently corrupt gradients.
    """
    if not isinstance(t, torch.Tensor):
        raise UsageError(
            f"torchmem.explain_inplace: expected a tensor, got {type(t).__name__}",
            tip="pass the tensor you plan to modify in place",
        )
    grad_mode = torch.is_grad_enabled()
    if t.is_inference() and not torch.is_inference_mode_enabled():
        return InplaceVerdict(
            False, "error_now",
            "it is an inference tensor (made under torch.inference_mode) and inference "
            "mode is off: 'Inplace update to inference tensor outside InferenceMode'",
            fix="modify it inside torch.inference_mode(), or clone it first",
        )
    base = t._base if t._is_view() else None
    if grad_mode and t.requires_grad and t.is_leaf:
        return InplaceVerdict(
            False, "error_now",
            "it is a leaf tensor that requires grad: autograd forbids changing it in "
            "place under grad mode",
            fix="wrap the update in `with torch.no_grad():` (as optimizers do)",
        )
    if grad_mode and base is not None:
        if base.requires_grad and base.is_leaf:
            return InplaceVerdict(
                False, "error_now",
                "it is a view of a leaf tensor that requires grad",
                fix="wrap the update in `with torch.no_grad():`",
            )
        if t.grad_fn is not None and _name(t.grad_fn).startswith(_MULTI_VIEW):
            return InplaceVerdict(
                False, "error_now",
                f"it is one of several views returned by one op ({_name(t.grad_fn)}); "
                "autograd cannot rebase such views",
                nodes=(_name(t.grad_fn),),
                fix="clone the piece first: `p = p.clone()`",
            )
        if not t.requires_grad and base.requires_grad:
            return InplaceVerdict(
                False, "error_now",
                "it is a view made under torch.no_grad() of a tensor that requires grad, "
                "modified with grad mode on",
                fix="modify it under torch.no_grad() too, or clone it",
            )
    root_nodes = _root_nodes(roots)
    key = storage_key(t)
    starts: list[Any] = []
    if t.grad_fn is not None:
        starts.append(t.grad_fn)
    if base is not None and base.grad_fn is not None:
        starts.append(base.grad_fn)
    savers: list[str] = []
    broken: list[str] = []
    for node in iter_nodes(starts + root_nodes):
        if _version_mismatch(node):
            broken.append(_name(node))
            continue
        saved = saved_tensors(node)
        if key is not None and any(storage_key(s) == key for s in saved):
            savers.append(_name(node))
        del saved
    if broken:
        return InplaceVerdict(
            False, "already_modified",
            f"{', '.join(broken)} saved a tensor that was already overwritten in place: "
            "backward through this graph will raise",
            nodes=tuple(broken), fix="recompute the graph, and " + _FIX_CLONE,
            checked_roots=len(roots),
        )
    if savers:
        return InplaceVerdict(
            False, "error_at_backward",
            f"{', '.join(savers)} saved it for backward; changing it makes backward "
            "raise 'modified by an inplace operation'",
            nodes=tuple(savers), fix=_FIX_CLONE, checked_roots=len(roots),
        )
    # "safe" needs evidence: the graph that will be backpropagated was searched
    if not roots:
        return InplaceVerdict(
            False, "unknown",
            "no graph roots were given: only its own node was searched, and a later "
            "operation that used it may have saved it for backward",
            fix=_FIX_ROOTS, checked_roots=0,
        )
    if not root_nodes:
        return InplaceVerdict(
            False, "unknown",
            "none of the roots has an autograd graph (made without grad, detached, or a "
            "leaf): there is no backward to check against",
            fix=_FIX_ROOTS, checked_roots=len(roots),
        )
    in_graph = t.requires_grad or (base is not None and base.requires_grad)
    if in_graph and not _reaches(root_nodes, t, base):
        return InplaceVerdict(
            False, "unknown",
            "the roots' graphs do not reach it: they say nothing about the backward that "
            "goes through it",
            fix=_FIX_ROOTS, checked_roots=len(roots),
        )
    if in_graph:
        reason = "the roots' graphs reach it and no node of them saved it for backward"
    else:
        reason = "it does not require grad, and no node of the roots' graphs saved it"
    return InplaceVerdict(True, "safe", reason, checked_roots=len(roots))


def _is_node(value: Any) -> bool:
    node_cls = getattr(getattr(torch.autograd, "graph", None), "Node", None)
    if node_cls is not None:
        try:
            if isinstance(value, node_cls):
                return True
        except TypeError:  # pragma: no cover - an exotic subclass hook
            pass
    return hasattr(value, "next_functions") and callable(getattr(value, "name", None))


def _root_nodes(roots: tuple[Any, ...]) -> list[Any]:
    """The graph nodes of ``roots`` (tensors or ``grad_fn`` nodes); anything else is a
    usage error, never silently ignored."""
    nodes: list[Any] = []
    for i, r in enumerate(roots):
        if isinstance(r, torch.Tensor):
            if r.grad_fn is not None:
                nodes.append(r.grad_fn)
        elif _is_node(r):
            nodes.append(r)
        else:
            shown = repr(r)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise UsageError(
                f"torchmem.explain_inplace: root {i + 1} is not a graph root; expected a "
                f"tensor (the loss) or a grad_fn node, got {type(r).__name__} {shown}",
                tip="pass each root as its own argument: explain_inplace(t, loss), or "
                "explain_inplace(t, *outputs) for a list of outputs",
            )
    return nodes


def _reaches(root_nodes: list[Any], t: torch.Tensor, base: torch.Tensor | None) -> bool:
    """Whether the graphs of ``root_nodes`` go through ``t`` (its node, its base's node,
    or the ``AccumulateGrad`` of it or its base when it is a leaf)."""
    own = (t.grad_fn, base.grad_fn if base is not None else None)
    targets = [n for n in own if n is not None]
    leaves = [x for x in (t, base) if x is not None and x.is_leaf]
    for node in iter_nodes(root_nodes):
        if any(node is n for n in targets):
            return True
        variable = getattr(node, "variable", None)
        if variable is not None and any(variable is x for x in leaves):
            return True
    return False


class InputMutationWarning(UserWarning):
    """Warned by :func:`no_input_mutation` with ``action="warn"``."""


class _Guard:
    """Both a decorator and a context manager (see :func:`no_input_mutation`)."""

    def __init__(self, tensors: tuple[Any, ...], action: str) -> None:
        if action not in ("raise", "warn"):
            raise UsageError(
                "torchmem.no_input_mutation: unknown action; expected 'raise' or 'warn', "
                f"got {action!r}",
                tip="no_input_mutation(action='warn') only warns",
            )
        self.action = action
        self._tensors = tensors
        self._before: list[tuple[str, torch.Tensor, int]] = []

    @staticmethod
    def _versions(named: Iterator[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor, int]]:
        out = []
        for name, t in named:
            try:
                out.append((name, t, t._version))
            except RuntimeError:  # inference tensors have no version counter
                continue
        return out

    def _check(self, before: list[tuple[str, torch.Tensor, int]], who: str) -> None:
        changed = [(n, v0, t._version) for n, t, v0 in before if t._version != v0]
        if not changed:
            return
        detail = ", ".join(f"{n!s} (version {v0} -> {v1})" for n, v0, v1 in changed)
        msg = (
            f"torchmem.no_input_mutation: {who} modified its tensor input(s) in place: "
            f"{detail}; expected inputs left unchanged, got {len(changed)} modified"
        )
        tip = "clone inside the function (`x = x.clone()`) or use out-of-place ops"
        if self.action == "raise":
            raise InputMutationError(msg, tip=tip)
        warnings.warn(f"{msg}. Tip: {tip}", InputMutationWarning, stacklevel=3)

    # -- context form ------------------------------------------------------------------
    def __enter__(self) -> _Guard:
        named = (item for i, v in enumerate(self._tensors)
                 for item in named_tensors(v, f"argument {i}", max_depth=4))
        self._before = self._versions(named)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        before, self._before = self._before, []
        if exc_type is None:
            self._check(before, "the block")
        return False

    # -- decorator form ----------------------------------------------------------------
    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise UsageError(
                "torchmem.no_input_mutation: expected a function to decorate, got "
                f"{type(fn).__name__}", tip="@torchmem.no_input_mutation above a def",
            )
        try:
            sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        who = f"{getattr(fn, '__qualname__', 'the function')}()"

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            named: list[tuple[str, Any]]
            try:
                bound = sig.bind(*args, **kwargs) if sig is not None else None
            except TypeError:
                bound = None
            if bound is not None:
                named = list(bound.arguments.items())
            else:
                named = [(f"argument {i}", a) for i, a in enumerate(args)] + list(kwargs.items())
            before = self._versions(item for n, v in named for item in named_tensors(v, n, max_depth=4))
            result = fn(*args, **kwargs)
            self._check(before, who)
            return result

        return wrapper


def no_input_mutation(*tensors: Any, action: str = "raise") -> Any:
    """Detect a function (or block) that modifies its tensor inputs in place.

    Three forms::

        @torchmem.no_input_mutation
        def step(x): ...

        @torchmem.no_input_mutation(action="warn")
        def step(x): ...

        with torchmem.no_input_mutation(x, batch, action="warn"):
            ...

    It compares each input tensor's version counter (``t._version``, bumped by every
    in-place op, ``out=`` write and indexed assignment, through any view) before and
    after. Tensors inside lists, tuples and dicts are checked too.

    Args:
        *tensors: a function to decorate, or (context form) the tensors to watch.
        action: ``"raise"`` (:class:`~torchmem.errors.InputMutationError`, after the
            function returned: the mutation has happened) or ``"warn"``
            (:class:`InputMutationWarning`).

    Returns:
        The wrapped function, a decorator, or a context manager.

    Known limitations:
        Writes through ``.data`` or ``torch.no_grad()`` still bump the version and are
        reported; writes through ``.numpy()`` arrays or raw pointers are not seen.
    """
    if len(tensors) == 1 and callable(tensors[0]) and not isinstance(tensors[0], torch.Tensor):
        return _Guard((), action)(tensors[0])
    return _Guard(tensors, action)
