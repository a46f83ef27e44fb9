"""Scoped tensor lifetimes: free every temporary at the end of a block, deterministically.

``with torchmem.scope() as s:`` registers every storage that any op creates inside the
block -- temporaries inside library code included -- and, at the exit, frees the
storage of each one that was not kept, **even if a Python name, a closure or a
reference cycle still points at it**. It is the Python counterpart of TorchSharp's
dispose scopes, without the ``using`` on every temporary.

Ownership rules -- what a scope never frees:
    1. Anything that existed before the scope, and views of it (their storage is not
       new), including tensors modified in place (BatchNorm running statistics...).
    2. What you keep: ``s.keep(obj)`` (tensors, containers, modules), the return value
       of an ``@torchmem.scoped`` function, and every storage the autograd graph of a
       kept tensor saved for backward, so ``s.keep(loss)`` then ``loss.backward()``
       after the scope gives the same gradients as without a scope.
    3. Gradients and everything else a backward pass creates.
    4. Optimizer state created by ``optimizer.step()`` inside the scope.
    5. Parameters and buffers registered on an ``nn.Module`` inside the scope (a model
       built inside), and any leaf tensor with ``requires_grad=True``.
    6. Storages that something torchmem cannot see still holds (a tensor made by
       ``param.data = new``, an ``nn.Parameter`` wrapping a new tensor, C++ state):
       a storage is freed only when every reference to it is a tensor object the scope
       saw, or a copy in the saved tensors of an autograd graph built inside the scope.
       Where ownership is ambiguous, the scope does not free.

Everything else created inside is freed at the exit: temporaries, tensors stored in a
list or an attribute that outlives the scope (keep them), tensors trapped in closures
and reference cycles. Kept tensors of a nested scope move to the enclosing scope (like
TorchSharp's ``MoveToOuter``), which frees them at its own exit unless it keeps them.

A tensor object over a freed storage becomes a released tensor: every torch
operation on it (methods, ``torch.*`` functions, operators, indexing, ``.shape``)
raises :class:`~torchmem.errors.ReleasedTensorError` naming the scope's ``file:line``;
``repr()`` prints a placeholder.

Cost (``python benchmarks/scope.py --rounds 7 --steps 5``, CPU, torch 2.13, on a
2-core machine under heavy shared load): a scope adds about 10-35 us per aten op on
top of what a no-op ``TorchDispatchMode`` costs; around a whole training step, 1.94x
the bare step on an MLP (no-op mode 1.77x) and 3.58x on an LSTM-cell step of 1167 ops
(no-op mode 2.28x). The exit walks the autograd graph of kept tensors and of surviving
unkept ones (a few us per node). See docs/scopes.md.

Known limitations:
    * Tensors built outside the dispatcher are invisible: ``torch.from_numpy``,
      ``torch.load`` storages, C++ extensions that bypass aten. They are never freed.
    * Ops other threads run are not registered (modes are per thread); a scope belongs
      to the thread that entered it.
    * A tensor kept only as a plain attribute (``self.cache = h``) is not owned by
      anything torchmem can see: it is freed unless kept.
    * Tensor subclasses other than ``nn.Parameter`` keep their class when freed: using
      them afterwards fails with torch's own error rather than ReleasedTensorError.
    * ``torch.compile`` regions run eagerly under the mode.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from typing import Any, Callable, Literal, TypeVar, overload

import torch

from torchmem.collect.graph import storage_key
from torchmem.errors import UsageError
from torchmem.model.scope import ScopeReport
from torchmem.scope import _engine
from torchmem.scope._free import (
    caller_location,
    free_storage,
    invalidate,
    mark_released,
    user_frame,
)
from torchmem.scope._graphs import DyingSaves, LiveGraphs, can_account
from torchmem.scope._objects import captured_tensors
from torchmem.scope._objects import iter_tensors

__all__ = ["Scope", "ScopeReport", "scope", "scoped"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

# code flags of frames that can be suspended (generators, coroutines)
_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class Scope:
    """A block whose unkept tensors are freed at its exit. Use :func:`scope`.

    Attributes:
        name: optional label shown in errors and reports.
        location: ``file:line`` where the scope was entered (``None`` before).
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.location: str | None = None
        self._thread: int | None = None
        self._state: _engine.ThreadState | None = None
        self._parent: Scope | None = None
        self._open = False
        self._entries: dict[int, _engine.Entry] = {}
        self._kept: dict[int, weakref.ref] = {}
        self._kept_keys: set[int] = set()
        self._touched: dict[int, weakref.ref] = {}
        self._hook_fns: list[Any] = []  # autograd hooks registered inside (until the exit)
        # the generator/coroutine frame that entered the scope (None for plain frames)
        self._suspendable: Any = None
        self._created = 0
        self._created_bytes = 0
        self._live = 0
        self._peak = 0
        self._freed_inside = 0
        self._report: ScopeReport | None = None

    # -- context manager -------------------------------------------------------------
    def __enter__(self) -> Scope:
        if self._thread is not None:
            raise UsageError(
                "torchmem.scope: a Scope object can be entered once; expected a new "
                "scope, got one already used",
                tip="call torchmem.scope() again for each block",
            )
        self.location = caller_location()
        frame = user_frame()
        if frame is not None and frame.f_code.co_flags & _SUSPENDABLE:
            self._suspendable = frame
        del frame
        st = _engine.state()
        self._parent = st.stack[-1] if st.stack else None
        self._thread = threading.get_ident()
        self._state = st
        self._open = True
        _engine.push(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        st = self._state
        assert st is not None
        if threading.get_ident() != self._thread:
            raise UsageError(
                "torchmem.scope: exited on another thread; expected the thread that "
                "entered it",
                tip="a scope belongs to its thread; open one scope per thread",
            )
        paused = st.paused
        st.paused = True
        try:
            self._report = self._close(exc_type.__name__ if exc_type else None)
        finally:
            self._open = False
            self._suspendable = None
            st.paused = paused
            _engine.pop(st, self)
        return False

    # -- public API ------------------------------------------------------------------
    def keep(self, obj: T) -> T:
        """Mark ``obj``'s tensors as outliving this scope and return ``obj`` unchanged.

        Args:
            obj: a tensor, a (nested) list/tuple/dict of tensors, an ``nn.Module`` or
                an optimizer. Tensors that were not created in the scope are accepted
                and left alone.

        Returns:
            ``obj`` itself, so ``out = s.keep(model(x))`` reads naturally.

        Raises:
            UsageError: the scope has already exited.
        """
        if not self._open:
            raise UsageError(
                "torchmem.scope: keep() called outside the scope; expected an open "
                "scope, got a closed one",
                tip="call s.keep(...) inside the `with torchmem.scope() as s:` block",
            )
        for t in iter_tensors(obj):
            key = storage_key(t)
            if key is not None:
                self._kept_keys.add(key)
            ref = self._kept.get(id(t))
            if ref is None or ref() is not t:
                self._kept[id(t)] = weakref.ref(t)
        return obj

    @property
    def report(self) -> ScopeReport:
        """What the scope did (available after the exit).

        Raises:
            UsageError: the scope has not exited yet.
        """
        if self._report is None:
            raise UsageError(
                "torchmem.scope: the report is made at the exit; expected a closed "
                "scope, got an open one",
                tip="read s.report after the `with` block",
            )
        return self._report

    @property
    def live_bytes(self) -> int:
        """Bytes of storages created in this scope (nested included) alive now."""
        return self._live

    def __repr__(self) -> str:
        state = "open" if self._open else ("closed" if self._report else "new")
        label = f"{self.name} " if self.name else ""
        return f"<torchmem.Scope {label}{state} at {self.location}>"

    # -- the exit ----------------------------------------------------------------------
    def _close(self, error: str | None) -> ScopeReport:
        st = self._state
        assert st is not None
        by = f"torchmem.scope{f' {self.name!r}' if self.name else ''} entered at {self.location}"
        kept_objs = [t for t in (r() for r in self._kept.values()) if t is not None]
        kept_keys = set(self._kept_keys)
        for t in kept_objs:
            k = storage_key(t)
            if k is not None:
                kept_keys.add(k)
        outer_keys: set[int] = set()
        parent = self._parent
        while parent is not None:
            outer_keys |= parent._kept_keys
            parent = parent._parent

        protected: dict[str, int] = {}
        protected_bytes = 0
        kept = kept_bytes = 0
        hand_on: list[_engine.Entry] = []
        drop: list[_engine.Entry] = []
        candidates: list[_engine.Entry] = []
        # graphs that outlive the scope: of kept tensors, of pre-existing tensors
        # mutated inside, and of every tensor the scope does not free
        live = LiveGraphs()
        live.add(kept_objs)
        live.add(t for t in (r() for r in self._touched.values()) if t is not None)
        del kept_objs

        def protect(e: _engine.Entry, reason: str, n: int) -> None:
            nonlocal protected_bytes
            protected[reason] = protected.get(reason, 0) + 1
            protected_bytes += n
            live.add(e.alive_tensors())

        for e in list(self._entries.values()):
            stg = e()
            if stg is None:
                continue
            k, n = e.key, e.nbytes
            if k in kept_keys:
                kept += 1
                kept_bytes += n
                hand_on.append(e)
                live.add(e.alive_tensors())
            elif e.reason is not None:
                protect(e, e.reason, n)
                drop.append(e)
            elif k in outer_keys:
                protect(e, "outer_keep", n)
                hand_on.append(e)
            elif any(isinstance(t, torch.nn.Parameter) or (t.requires_grad and t.is_leaf)
                     for t in e.alive_tensors()):
                protect(e, "leaf_requires_grad", n)
                drop.append(e)
            else:
                candidates.append(e)

        if self._hook_fns and candidates:  # what a backward hook will read
            captured = {storage_key(t) for fn in self._hook_fns for t in captured_tensors(fn)}
            spared = [e for e in candidates if e.key in captured]
            for e in spared:
                protect(e, "hook_closure", e.nbytes)
                hand_on.append(e)
            candidates = [e for e in candidates if e.key not in captured]
        candidates = self._spare_saved(candidates, live, protect, hand_on)
        free: list[tuple[_engine.Entry, list[torch.Tensor]]] = []
        if candidates:
            dying = DyingSaves((t for e in candidates for t in e.alive_tensors()),
                               {e.key for e in candidates}, live)
            for e in candidates:
                stg = e()
                if stg is None:
                    continue
                impls = can_account(stg, e.key, e.alive_tensors(), dying)
                if impls is None:
                    protect(e, "unseen_holder", e.nbytes)
                    drop.append(e)
                else:
                    free.append((e, impls))
            dying.clear()
            del dying
            if len(free) < len(candidates):  # graphs of what was spared stay alive
                spared = {id(e) for e in
                          self._spare_saved([e for e, _ in free], live, protect, hand_on)}
                free = [(e, impls) for e, impls in free if id(e) in spared]

        released = released_bytes = released_tensors = 0
        for e, impls in free:
            stg = e()
            if stg is None:
                continue
            objs = e.alive_tensors()
            n = int(stg.nbytes())
            invalidate(impls)
            freed = free_storage(stg)
            if n and not freed:
                protect(e, "not_resizable", n)
                drop.append(e)
                continue
            released += 1
            released_bytes += freed
            released_tensors += mark_released(objs, by)
            seen = {id(t) for t in objs}  # bases and saved copies over the freed storage
            mark_released([t for t in impls if id(t) not in seen], by)
            drop.append(e)
            del objs, impls
        del free
        self._hand_on(hand_on, drop)
        if self._parent is not None:
            self._parent._touched.update(self._touched)
            self._parent._hook_fns.extend(self._hook_fns)
        self._touched.clear()
        self._hook_fns.clear()
        return ScopeReport(
            location=self.location or "<unknown>",
            created=self._created,
            created_bytes=self._created_bytes,
            freed_inside=self._freed_inside,
            kept=kept,
            kept_bytes=kept_bytes,
            released=released,
            released_bytes=released_bytes,
            released_tensors=released_tensors,
            protected=protected,
            protected_bytes=protected_bytes,
            peak_bytes=self._peak,
            error=error,
        )

    @staticmethod
    def _spare_saved(candidates: list[_engine.Entry], live: LiveGraphs,
                     protect: Callable[[_engine.Entry, str, int], None],
                     hand_on: list[_engine.Entry]) -> list[_engine.Entry]:
        """Protect the candidates a live graph saved for backward, until none is left;
        return the others."""
        while True:
            saved = [e for e in candidates if e.key in live.saved_keys]
            if not saved:
                return candidates
            ids = {id(e) for e in saved}
            candidates = [e for e in candidates if id(e) not in ids]
            for e in saved:
                protect(e, "saved_for_backward", e.nbytes)  # adds its graph to `live`
                hand_on.append(e)

    def _hand_on(self, hand_on: list[_engine.Entry], drop: list[_engine.Entry]) -> None:
        """Move kept entries to the parent scope; forget the others."""
        st = self._state
        assert st is not None
        parent = self._parent
        with st.lock:
            for e in hand_on:
                self._entries.pop(e.key, None)
                if parent is not None:
                    e.owner = parent
                    parent._entries[e.key] = e
                elif st.entries.get(e.key) is e:
                    del st.entries[e.key]
            for e in drop:
                self._entries.pop(e.key, None)
                if st.entries.get(e.key) is e:
                    del st.entries[e.key]
                scope = parent
                while scope is not None:  # no longer owned by the enclosing scopes
                    scope._live -= e.nbytes
                    scope = scope._parent
        self._entries.clear()


def scope(name: str | None = None) -> Scope:
    """Open a scope that frees every unkept tensor created inside at its exit.

    Args:
        name: optional label for errors and the report.

    Returns:
        A :class:`Scope` to use with ``with``.

    Example:
        >>> with torchmem.scope() as s:                  # doctest: +SKIP
        ...     loss = s.keep(criterion(model(x), y))
        >>> loss.backward()                               # doctest: +SKIP
        >>> s.report.released_bytes                       # doctest: +SKIP

    Known limitations:
        See the module docstring of :mod:`torchmem.scope.core` and docs/scopes.md.
    """
    return Scope(name)


@overload
def scoped(fn: F) -> F: ...
@overload
def scoped(fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...


def scoped(fn: Any = None, *, name: str | None = None) -> Any:
    """Decorator: run the function in a :func:`scope` and keep its return value.

    Example:
        >>> @torchmem.scoped                              # doctest: +SKIP
        ... def step(x):
        ...     return model(x).relu().sum()
    """

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with Scope(name or getattr(f, "__qualname__", None)) as s:
                return s.keep(f(*args, **kwargs))

        return wrapper  # type: ignore[return-value]

    if fn is not None:
        return decorate(fn)
    return decorate
