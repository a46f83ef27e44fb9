"""Snapshots: independent copies that never alias live tensors (``detach`` + copy).

``x.detach()`` shares memory with ``x``; ``model.state_dict()`` returns tensors that
share memory with the parameters, so a "best weights" dict taken that way silently
follows training. A snapshot owns its memory, has no autograd history, and can be put
on another device (``"cpu"`` to spare accelerator memory).

Restoring needs care too: ``Optimizer.load_state_dict`` adopts a state tensor that is
already on the parameter's device with the right dtype (``value.to(...)`` returns the
same tensor), so after ``opt.load_state_dict(best)`` the next ``step()`` writes into
``best`` itself. :func:`restore_state` loads a fresh copy, so one snapshot can be
restored any number of times.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import enum
from typing import Any

import torch

from torchmem.errors import UsageError

__all__ = ["snapshot", "snapshot_state", "restore_state"]

#: values that cannot change after they are made: shared, not copied
_IMMUTABLE = (
    type(None), bool, int, float, complex, str, bytes, range, slice, enum.Enum, type,
    torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format,
)


def _copy(t: torch.Tensor, device: Any, pin_memory: bool) -> torch.Tensor:
    d = t.detach()
    target = torch.device(device) if device is not None else d.device
    if pin_memory and target.type == "cpu":
        out = torch.empty(d.shape, dtype=d.dtype, device="cpu", pin_memory=True)
        out.copy_(d)
        return out
    if target == d.device:
        return d.clone()
    return d.to(target, copy=True)


class _Mapper:
    """Rebuilds a value with every tensor copied; ``memo`` keeps shared and cyclic
    references shared and cyclic in the copy (as :func:`copy.deepcopy` does)."""

    def __init__(self, device: Any, pin_memory: bool) -> None:
        self.device = device
        self.pin_memory = pin_memory
        self.memo: dict[int, Any] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            key = id(value)
            if key not in self.memo:
                self.memo[key] = _copy(value, self.device, self.pin_memory)
            return self.memo[key]
        if isinstance(value, _IMMUTABLE) and not isinstance(value, tuple):
            return value
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        out = self._container(value)
        self.memo[key] = out
        return out

    def _container(self, value: Any) -> Any:  # noqa: C901 - one branch per container kind
        if isinstance(value, dict):
            try:  # keeps the type, an OrderedDict's order, a default_factory
                out = copy.copy(value)
                out.clear()
            except Exception:  # noqa: BLE001 - a dict subclass that refuses
                return self._deep(value)
            self.memo[id(value)] = out
            for k, v in value.items():
                out[k] = self(v)
            return out
        if isinstance(value, list):
            out_list = copy.copy(value)
            out_list.clear()
            self.memo[id(value)] = out_list
            out_list.extend(self(v) for v in value)
            return out_list
        if isinstance(value, collections.deque):
            out_deque = copy.copy(value)  # keeps maxlen
            out_deque.clear()
            self.memo[id(value)] = out_deque
            out_deque.extend(self(v) for v in value)
            return out_deque
        if isinstance(value, tuple):
            items = [self(v) for v in value]
            if hasattr(value, "_fields"):  # namedtuple
                return type(value)(*items)
            if type(value) is tuple:
                return tuple(items)
            try:
                return type(value)(items)
            except Exception:  # noqa: BLE001 - a tuple subclass with its own constructor
                return self._deep(value)
        if isinstance(value, (set, frozenset)):
            try:
                return type(value)(self(v) for v in value)
            except Exception:  # noqa: BLE001 - a set subclass with its own constructor
                return self._deep(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out_dc = copy.copy(value)  # no __init__/__post_init__ run; frozen works too
            self.memo[id(value)] = out_dc
            names = [f.name for f in dataclasses.fields(value)]
            names += [n for n in getattr(value, "__dict__", {}) if n not in names]
            for name in names:
                if hasattr(value, name):
                    object.__setattr__(out_dc, name, self(getattr(value, name)))
            return out_dc
        if isinstance(value, (torch.nn.Module, torch.optim.Optimizer)):
            raise UsageError(
                f"torchmem.snapshot: got a {type(value).__name__}; expected tensors or "
                "containers of tensors (a module's or optimizer's state: snapshot_state)",
                tip="use torchmem.snapshot_state(model_or_optimizer) for a state dict that "
                "does not alias it",
            )
        return self._deep(value)

    def _deep(self, value: Any) -> Any:
        """A type this module does not know: a deep copy, never the same object."""
        try:
            return copy.deepcopy(value, {k: v for k, v in self.memo.items()})
        except Exception as err:  # noqa: BLE001 - an object that cannot be copied
            raise UsageError(
                f"torchmem.snapshot: cannot copy a {type(value).__name__} ({type(err).__name__}: "
                f"{err}); expected tensors in dicts, lists, tuples, namedtuples, sets, "
                "deques or dataclasses, or objects copy.deepcopy can copy",
                tip="snapshot the tensors you need (e.g. a dict of them), not the object",
            ) from None


def snapshot(obj: Any, device: Any = None, *, pin_memory: bool = False) -> Any:
    """Detached, independent copy of a tensor (or of every tensor in a container).

    Args:
        obj: a tensor, or a (nested) dict, list, tuple, namedtuple, set, deque or
            dataclass holding tensors (their subclasses too: ``OrderedDict``,
            ``defaultdict``...).
        device: where the copied tensors live (default: where each tensor is).
        pin_memory: with a CPU target, allocate page-locked memory (faster copies back
            to an accelerator; needs an accelerator build).

    Returns:
        The copy: each tensor with the same shape, dtype and values,
        ``requires_grad=False``, no storage shared with ``obj``. Containers and
        dataclasses are rebuilt with the same type (a dataclass is copied without
        running its ``__init__``); immutable values (numbers, strings, ``None``,
        dtypes, devices) are shared; objects of any other type are deep-copied with
        :func:`copy.deepcopy` (a tensor inside one keeps its ``requires_grad``).
        Nothing in the result is the same mutable object as in ``obj``.

    Raises:
        UsageError: an ``nn.Module`` or optimizer (use :func:`snapshot_state`), or an
            object that cannot be copied.

    Example:
        >>> best = torchmem.snapshot(model.state_dict(), "cpu")   # doctest: +SKIP
    """
    return _Mapper(device, pin_memory)(obj)


def snapshot_state(obj: Any, device: Any = "cpu", *, pin_memory: bool = False) -> dict[str, Any]:
    """A state dict that does not alias live parameters (best-weights checkpoints).

    Args:
        obj: an ``nn.Module`` or an optimizer (anything with ``state_dict()``).
        device: where the copied tensors live (default ``"cpu"``; ``None`` keeps each
            tensor's device).
        pin_memory: with a CPU target, use page-locked memory.

    Returns:
        ``obj.state_dict()`` with every tensor replaced by a detached copy. Restore it
        with :func:`restore_state` (``obj.load_state_dict(snap)`` works for a module,
        but an optimizer adopts the snapshot's tensors as its live state when they are
        on the parameters' device, and the next ``step()`` changes the snapshot).

    Raises:
        UsageError: ``obj`` has no ``state_dict()``.

    Example:
        >>> best = torchmem.snapshot_state(model)          # doctest: +SKIP
        >>> torchmem.restore_state(model, best)            # doctest: +SKIP
    """
    state_dict = getattr(obj, "state_dict", None)
    if not callable(state_dict):
        raise UsageError(
            "torchmem.snapshot_state: the object has no state_dict(); expected an "
            f"nn.Module or an optimizer, got {type(obj).__name__}",
            tip="use torchmem.snapshot() for tensors and containers",
        )
    return snapshot(state_dict(), device, pin_memory=pin_memory)  # type: ignore[no-any-return]


def restore_state(obj: Any, state: dict[str, Any], **kwargs: Any) -> Any:
    """Load a snapshot into ``obj`` without letting ``obj`` adopt the snapshot's tensors.

    ``nn.Module.load_state_dict`` copies values into the existing parameters, but
    ``Optimizer.load_state_dict`` keeps a state tensor that is already on the right
    device and dtype as its live state: later ``step()`` calls would then change the
    snapshot. This loads a fresh copy instead, so the snapshot stays as it was and can
    be restored again.

    Args:
        obj: an ``nn.Module`` or an optimizer (anything with ``load_state_dict()``).
        state: what :func:`snapshot_state` (or ``state_dict()``) returned.
        **kwargs: passed to ``load_state_dict`` (e.g. ``strict=False`` for a module).

    Returns:
        What ``obj.load_state_dict`` returns (a module's missing/unexpected keys).

    Raises:
        UsageError: ``obj`` has no ``load_state_dict()``, or ``state`` is not a dict.

    Example:
        >>> best, best_opt = torchmem.snapshot_state(model), torchmem.snapshot_state(opt)
        >>> ...                                             # doctest: +SKIP
        >>> torchmem.restore_state(model, best)            # doctest: +SKIP
        >>> torchmem.restore_state(opt, best_opt)          # doctest: +SKIP
    """
    load = getattr(obj, "load_state_dict", None)
    if not callable(load):
        raise UsageError(
            "torchmem.restore_state: the object has no load_state_dict(); expected an "
            f"nn.Module or an optimizer, got {type(obj).__name__}",
            tip="restore_state(model, snapshot_state(model))",
        )
    if not isinstance(state, dict):
        raise UsageError(
            "torchmem.restore_state: expected a state dict (what snapshot_state returns), "
            f"got {type(state).__name__}",
            tip="best = torchmem.snapshot_state(obj); later torchmem.restore_state(obj, best)",
        )
    if isinstance(obj, torch.nn.Module):
        # copies into the existing parameters and buffers (unless assign=True is asked)
        fresh = snapshot(state) if kwargs.get("assign") else state
        return load(fresh, **kwargs)
    return load(snapshot(state), **kwargs)
