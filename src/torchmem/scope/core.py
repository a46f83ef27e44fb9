"""Scoped tensor lifetimes: free every temporary at the end of a block, deterministically.

``with torchmem.scope() as s:`` registers the storages created inside the block and,
at the exit, frees the storage of each one that was not kept, **even if a Python name,
a closure or a reference cycle still points at it**. It is the Python counterpart of
TorchSharp's dispose scopes, without the ``using`` on every temporary.

Two engines see what is created (``scope(engine=...)``): ``"calls"`` (default,
:mod:`torchmem.scope._calls`) registers what torch calls made from Python return;
``"dispatch"`` (:mod:`torchmem.scope._engine`) registers every storage any aten op
creates, temporaries inside library calls included. Both follow the rules below.

Ownership rules -- what a scope never frees:
    1. Anything that existed before the scope, and views of it (their storage is not
       new), including tensors modified in place (BatchNorm running statistics...).
    2. What you keep: ``s.keep(obj)`` (tensors, containers, modules), the return value
       of an ``@torchmem.scoped`` function.
    3. Whatever an autograd graph that outlives the scope saved for backward: the
       graph of a kept tensor, of a tensor created before the scope and updated in
       place inside it (``total += loss``, ``buf[i].add_(h)``), or of any tensor the
       scope does not free. So ``s.keep(loss); loss.backward()`` after the scope, and
       micro-batch losses accumulated into an outside tensor, give the same gradients
       as without a scope (bit for bit; tested on random programs).
    4. What a backward hook registered inside the scope can read (tensors its closure,
       default arguments or ``functools.partial`` arguments hold).
    5. Gradients and everything else a backward pass creates; optimizer state created
       by ``optimizer.step()``; parameters and buffers registered on an ``nn.Module``
       inside the scope, and any leaf tensor with ``requires_grad=True``; tensors
       created while saved-tensor hooks are active (``torch.utils.checkpoint``,
       ``save_on_cpu``).
    6. Storages that something torchmem cannot account for still uses: a storage is
       freed only when every reference to it is explained -- tensor objects the scope
       saw, views of them, and the saved variables of autograd graphs that die with
       the freed tensors. Anything else (a ``.data`` alias, a C++ container, the saved
       inputs of ``torch.utils.checkpoint``) protects it. Where ownership is
       ambiguous, the scope does not free.

Everything else created inside is freed at the exit: temporaries, tensors stored in a
list or an attribute that outlives the scope (keep them), tensors trapped in closures
and reference cycles. Kept tensors of a nested scope move to the enclosing scope (like
TorchSharp's ``MoveToOuter``), which frees them at its own exit unless it keeps them.
A scope entered in a generator owns the ops the generator runs, not those of its
consumer while it is suspended at a ``yield``.

A tensor object over a freed storage becomes a released tensor: every torch
operation on it (methods, ``torch.*`` functions, operators, indexing) raises
:class:`~torchmem.errors.ReleasedTensorError` naming the scope's ``file:line``;
questions that read no data (``.shape``, ``.dtype``, ``.device``, ``.numel()``,
``.untyped_storage()``) answer truthfully, so gc-walking tools keep working, and
``repr()`` prints a placeholder. Before freeing, the scope bumps the storage's
version counter: a backward pass that would still read it (through a holder no rule
above could see) raises torch's "modified by an inplace operation" error instead of
reading freed memory.

Cost (``python benchmarks/scope.py --threads 1 --tables 0,1``, CPU, torch 2.13, a
busy 2-core machine): the calls engine costs what a no-op ``TorchFunctionMode`` costs
(1.1-1.4x a bare step there) plus 1-2 us per torch call and about 5 us per new
storage: 1.5-1.7x an MLP step, 1.4-1.6x an LSTM-cell step. The dispatch engine pays a
Python call per aten op: 2.1-2.4x and 4.5-5.5x. The exit walks the autograd graphs
that outlive the scope and those of the freed tensors (a few us per node) and reads
two reference counts per freed storage. See docs/scopes.md.

Known limitations:
    * Tensors built outside the dispatcher are invisible: ``torch.from_numpy``,
      ``torch.load`` storages, C++ extensions that bypass aten. They are never freed.
      The calls engine also leaves what one call makes and does not return.
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

from torchmem.collect.graph import storage_key
from torchmem.errors import UsageError
from torchmem.model.scope import ScopeReport
from torchmem.scope import _engine, _exit, _stack
from torchmem.scope._free import frame_location, user_frame
from torchmem.scope._objects import iter_tensors

__all__ = ["Scope", "ScopeReport", "scope", "scoped", "ENGINES"]

#: How a scope sees the storages created inside it (see :func:`scope`).
ENGINES = ("calls", "dispatch")

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

    def __init__(self, name: str | None = None, *, engine: str = "calls") -> None:
        if engine not in ENGINES:
            raise UsageError(
                f"torchmem.scope: unknown engine; expected one of {', '.join(ENGINES)}, "
                f"got {engine!r}",
                tip='engine="calls" (the default) or engine="dispatch" (also frees '
                    "temporaries made inside one torch call)",
            )
        self.name = name
        self._engine_kind = engine
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
        # a create_graph=True backward ran inside: gradients nobody registered may reach
        # this scope's graphs, so no graph can be shown to die with the freed tensors
        self._graphs_escape = False
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
        frame = user_frame()
        self.location = frame_location(frame)
        if frame is not None and frame.f_code.co_flags & _SUSPENDABLE:
            self._suspendable = frame
        del frame
        st = _engine.state()
        self._parent = st.stack[-1] if st.stack else None
        self._thread = threading.get_ident()
        self._state = st
        self._open = True
        _stack.push(self)
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
            _stack.pop(st, self)
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
        return _exit.close(self, error)


def scope(name: str | None = None, *, engine: str = "calls") -> Scope:
    """Open a scope that frees every unkept tensor created inside at its exit.

    Args:
        name: optional label for errors and the report.
        engine: how the scope sees what is created inside it.

            * ``"calls"`` (default): every torch call made from Python (functions,
              factories, ``Tensor`` methods and operators, ``torch.nn.functional``) is
              seen once; the tensors calls return are registered. Temporaries made
              inside one call and never returned (what ``cross_entropy``'s graph saves
              internally) are left to their graph. About 1.1-1.3x a bare training step.
            * ``"dispatch"``: every aten op is seen, library temporaries included, so
              the scope also frees what graphs saved inside library calls and its report
              counts every storage. About 2x an MLP step and 4-5x an LSTM-cell step.

            Both follow the same ownership rules and never free a storage whose every
            reference they cannot explain.

    Returns:
        A :class:`Scope` to use with ``with``.

    Raises:
        UsageError: an unknown ``engine``.

    Example:
        >>> with torchmem.scope() as s:                  # doctest: +SKIP
        ...     loss = s.keep(criterion(model(x), y))
        >>> loss.backward()                               # doctest: +SKIP
        >>> s.report.released_bytes                       # doctest: +SKIP

    Known limitations:
        See the module docstring of :mod:`torchmem.scope.core` and docs/scopes.md.
    """
    return Scope(name, engine=engine)


@overload
def scoped(fn: F) -> F: ...
@overload
def scoped(fn: None = None, *, name: str | None = None,
           engine: str = "calls") -> Callable[[F], F]: ...


def scoped(fn: Any = None, *, name: str | None = None, engine: str = "calls") -> Any:
    """Decorator: run the function in a :func:`scope` and keep its return value.

    Example:
        >>> @torchmem.scoped                              # doctest: +SKIP
        ... def step(x):
        ...     return model(x).relu().sum()
    """

    if engine not in ENGINES:
        Scope(engine=engine)  # raises the UsageError now, not at the first call

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with Scope(name or getattr(f, "__qualname__", None), engine=engine) as s:
                return s.keep(f(*args, **kwargs))

        return wrapper  # type: ignore[return-value]

    if fn is not None:
        return decorate(fn)
    return decorate
