"""Private engine of :func:`torchmem.scope`: register every storage ops create.

One :class:`~torch.utils._python_dispatch.TorchDispatchMode` per thread, pushed when
the thread's first scope is entered and popped when its last one exits, sees every
aten op's outputs (library code, factories and backward ops included). An output whose
untyped storage is neither one of the op's inputs' storages nor already registered is
*created in scope*: the engine keeps a ``weakref.ref`` to the storage (with a callback
that forgets it when it dies) and weak references to every tensor object it sees over
that storage, so that the scope can later swap their class. Nothing is held strongly.

Modes are thread-local: ops other threads run are not registered, except autograd's
worker threads, which run backward ops under the caller's modes; those are gradients
and are protected anyway.

The engine also remembers (weakly) every tensor over a storage that existed before
the scope which an op *mutated* inside it (``total += loss``, ``buf.copy_(h)``): such a
tensor can carry an autograd graph built inside the scope, and the scope must not free
what that graph saved.

A scope entered in a generator (or coroutine) frame owns the ops run while that frame
executes, not those its consumer runs while the generator is suspended at a ``yield``:
those go to the innermost scope whose frame is running, or to none.

The modes are pushed and popped by :mod:`torchmem.scope._stack`, which also installs
the global hooks of :mod:`torchmem.scope._hooks` while a scope is open.

Cost (``benchmarks/scope.py``, table 0): per aten op, one Python call (what a no-op
mode costs) plus a storage lookup per output; view ops are recognised from their
schema and cost nothing more; a new storage adds two weak references, a callback and
a lock. Measured: about 5 us per storage-creating op above a no-op mode on a busy
2-core machine. Memory held: a few hundred bytes per live registered storage.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.scope.core import Scope

__all__ = ["Entry", "ThreadState", "state", "owner_of"]

_ALWAYS_NEW = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy"})
_current_node = getattr(torch._C, "_current_autograd_node", None)
_saved_hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
_grad_enabled = torch.is_grad_enabled
# the StorageImpl's address, equal to ``untyped_storage()._cdata``; a plain C function,
# so reading it under a torch-function mode is not a torch call
_storage_id = getattr(torch._C, "_storage_id", None)


class Entry(weakref.ref):  # type: ignore[type-arg]
    """Weak reference to a registered storage, with what the scope needs to know."""

    __slots__ = ("key", "nbytes", "tensors", "owner", "reason")

    key: int
    nbytes: int
    tensors: dict[int, weakref.ref]  # id(tensor) -> weakref(tensor)
    owner: Scope
    reason: str | None

    def alive_tensors(self) -> list[torch.Tensor]:
        """Tensor objects seen over this storage that are still alive (strong refs:
        drop the list quickly)."""
        out = []
        for r in self.tensors.values():
            t = r()
            if t is not None:
                out.append(t)
        return out


class ThreadState:
    """The open scopes of one thread and the storages they registered."""

    def __init__(self) -> None:
        self.stack: list[Scope] = []
        self.entries: dict[int, Entry] = {}
        # engine kind ("calls", "dispatch") -> (its mode, how many open scopes use it)
        self.modes: dict[str, tuple[Any, int]] = {}
        self.paused = False
        # optimizer.step() calls running now: the calls engine does not register what
        # they make under no_grad (state is protected anyway, the rest dies inside)
        self.in_step = 0
        self.lock = threading.Lock()

    # -- registration (called by the mode) -----------------------------------------
    def _forget(self, entry: Entry) -> None:
        # weakref callback: the storage died (maybe on another thread)
        with self.lock:
            if self.entries.get(entry.key) is entry:
                del self.entries[entry.key]
            owner = entry.owner
            if owner._entries.get(entry.key) is not entry:
                return  # already handed on or dropped by a closing scope
            del owner._entries[entry.key]
            n = entry.nbytes
            scope: Scope | None = owner
            while scope is not None:
                scope._live -= n
                scope._freed_inside += 1
                scope = scope._parent

    def register(self, st: Any, key: int, t: torch.Tensor) -> None:
        owner = owner_of(self.stack)
        if owner is None:
            return
        n = int(st.nbytes())
        entry = Entry(st, self._forget)
        entry.key = key
        entry.nbytes = n
        entry.tensors = {id(t): weakref.ref(t)}
        entry.owner = owner
        entry.reason = None
        if _current_node is not None and _current_node() is not None:
            entry.reason = "autograd"
        elif _saved_hooks is not None and _saved_hooks(False) is not None:
            # made while saved-tensor hooks are active (checkpoint, save_on_cpu): the
            # hooks may keep it in Python objects that autograd reads in backward
            entry.reason = "saved_tensors_hooks"
        with self.lock:
            self.entries[key] = entry
            owner._entries[key] = entry
            scope: Scope | None = owner
            while scope is not None:
                scope._created += 1
                scope._created_bytes += n
                live = scope._live + n
                scope._live = live
                if live > scope._peak:
                    scope._peak = live
                scope = scope._parent

    def touch(self, t: torch.Tensor) -> None:
        """Remember ``t``, a tensor over a pre-existing storage mutated in the scope, and
        its base: ``buf[i] = h`` writes through a view that dies with the statement,
        while the graph it gave ``buf`` lives on in the base."""
        owner = owner_of(self.stack)
        if owner is None:
            return
        touched = owner._touched
        while t is not None:
            ref = touched.get(id(t))
            if ref is None or ref() is not t:
                touched[id(t)] = weakref.ref(t)
            t = t._base

    def mark(self, t: torch.Tensor, reason: str) -> None:
        """Protect the registered storage behind ``t`` (if any) for ``reason``."""
        try:
            key = int(_storage_id(t)) if _storage_id is not None else int(
                t.untyped_storage()._cdata)
        except (RuntimeError, NotImplementedError, TypeError, AttributeError):
            return
        entry = self.entries.get(key)
        if entry is not None and entry.reason is None:
            entry.reason = reason


def owner_of(stack: list[Scope]) -> Scope | None:
    """The innermost scope of ``stack`` that is running (not suspended in a generator)."""
    for scope in reversed(stack):
        frame = scope._suspendable
        if frame is None or frame.f_back is not None:
            return scope
    return None


def _add_keys(value: Any, keys: set[int]) -> None:
    for v in value:
        if isinstance(v, torch.Tensor):
            try:
                keys.add(v.untyped_storage()._cdata)
            except (RuntimeError, NotImplementedError, TypeError, AttributeError):
                pass  # sparse, nested, wrapper subclasses: no plain storage
        elif isinstance(v, (tuple, list)):
            _add_keys(v, keys)


def _input_keys(args: Any, kwargs: Any) -> set[int]:
    """Storage keys of every tensor among an op's arguments (lists included)."""
    keys: set[int] = set()
    _add_keys(args, keys)
    if kwargs:
        _add_keys(kwargs.values(), keys)
    return keys


# what an op's outputs are, from its schema (cached per op)
_PLAIN, _NEW, _VIEW, _MUTATES = 0, 1, 2, 3


def _kind(func: Any) -> int:
    try:
        if func.name() in _ALWAYS_NEW:
            return _NEW
    except AttributeError:
        pass
    try:
        if func._schema.is_mutable:
            return _MUTATES
    except AttributeError:
        return _MUTATES  # unknown: assume it may carry a new graph
    return _VIEW if getattr(func, "is_view", False) else _PLAIN


#: op -> _NEW, _VIEW, _MUTATES or _PLAIN, shared by every mode (from the op's schema)
_KINDS: dict[Any, int] = {}


class _Mode(TorchDispatchMode):
    def __init__(self, st: ThreadState) -> None:
        super().__init__()
        self.state = st
        self.kinds = _KINDS

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        st = self.state
        if st.paused or not st.stack:
            return out
        if isinstance(out, torch.Tensor):
            self._see(func, out, args, kwargs, None)
        elif isinstance(out, (tuple, list)):
            inputs: list[set[int] | None] = [None]
            for t in out:
                if isinstance(t, torch.Tensor):
                    self._see(func, t, args, kwargs, inputs)
        return out

    def _see(self, func: Any, t: torch.Tensor, args: Any, kwargs: Any,
             inputs: list[set[int] | None] | None) -> None:
        try:
            storage = t.untyped_storage()
            key = int(storage._cdata)
        except (RuntimeError, NotImplementedError, TypeError, AttributeError):
            return  # sparse, nested, wrapper subclasses: nothing to free
        st = self.state
        entry = st.entries.get(key)
        if entry is not None:
            tensors = entry.tensors
            ref = tensors.get(id(t))
            if ref is None or ref() is not t:
                tensors[id(t)] = weakref.ref(t)
            # an enclosing scope's tensor mutated here may now carry this scope's graph
            if entry.owner is not st.stack[-1] and self._mutates(func) and _grad_enabled():
                st.touch(t)
            return
        kind = self.kinds.get(func)
        if kind is None:
            kind = self.kinds[func] = _kind(func)
        if kind == _VIEW or t.is_meta:
            return  # a view of an input (the schema says so): its storage is not new
        if kind != _NEW:
            if inputs is None:
                keys = _input_keys(args, kwargs)
            else:
                cached = inputs[0]
                if cached is None:
                    cached = inputs[0] = _input_keys(args, kwargs)
                keys = cached
            if key in keys:  # a view of, or an in-place result on, an input
                if kind == _MUTATES and _grad_enabled():  # no graph under no_grad
                    st.touch(t)
                return
        st.register(storage, key, t)

    def _mutates(self, func: Any) -> bool:
        kind = self.kinds.get(func)
        if kind is None:
            kind = self.kinds[func] = _kind(func)
        return kind == _MUTATES


_tls = threading.local()


def state() -> ThreadState:
    """This thread's scope state (created on first use)."""
    st = getattr(_tls, "state", None)
    if st is None:
        st = _tls.state = ThreadState()
    return st
