"""Private engine: count the bytes of tensor storages created while it runs.

A :class:`~torch.utils._python_dispatch.TorchDispatchMode` sees every aten op that
returns a tensor, factories (``torch.empty``, ``zeros``, ``randn``...) and the ops
autograd runs during backward included (the mode is thread-local state that autograd
propagates to its worker threads). For each output whose untyped storage is new -- not
one of the op's inputs' storages and not already counted -- the engine adds the
storage's ``nbytes`` and keeps a ``weakref.ref`` to the untyped storage with a callback
that subtracts them when the storage is freed. It never holds a strong reference: the
user's memory is freed exactly when it would be without torchmem.

The public face is :class:`torchmem.Tracker`; this module is one engine shared by all
trackers: the mode is pushed once per thread (on the outermost tracker's ``__enter__``)
and popped on its ``__exit__``. The counted storages of a device are dropped when its
last tracker ends, unless :meth:`Engine.keep` made them a ledger (exact trackers,
:mod:`torchmem.collect._ledger`): then their frees keep being subtracted, between
regions too, until :meth:`Engine.forget`.

Cost (``benchmarks/collectors.py``): one Python call per aten op, plus about 1-2 us per
output tensor; a new storage also costs one weakref (about 1 us and ~150 bytes held
until the storage dies).

Known limitations:
    * Scratch buffers an op allocates and frees inside its own kernel are not tensors
      the dispatcher returns, so they are not counted (e.g. matmul workspaces); the
      CUDA path of the Tracker, which reads the allocator, does see them.
    * Storages made outside the dispatcher are not seen: ``torch.load``,
      ``torch.from_numpy`` (numpy's memory), ``UntypedStorage(n)``, tensors built by C++
      extensions that bypass aten, and ops run on threads the mode was not pushed on
      (their frees are seen).
    * ``torch.compile``'d regions run under a dispatch mode fall back to eager.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchmem.collect._op_kinds import OP_FRESH, OP_NEW, OP_SIZED, OP_SKIP, OpInfo, op_info

__all__ = ["engine", "Engine", "EngineCounter"]

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_use_count = getattr(torch._C, "_storage_Use_Count", None)


class _StorageRef(weakref.ref):  # type: ignore[type-arg]
    __slots__ = ("key", "nbytes", "dev", "site")
    key: int
    nbytes: int
    dev: str
    site: Any  # set by an observer (torchmem.collect.lines): where it was allocated


def _tensors(value: Any, out: list[torch.Tensor]) -> None:
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            if isinstance(v, torch.Tensor):
                out.append(v)
            elif isinstance(v, (tuple, list)):
                _tensors(v, out)


def _key(t: torch.Tensor) -> int | None:
    try:
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return None


class _Mode(TorchDispatchMode):
    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self._engine = engine

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        engine = self._engine
        info = engine._ops.get(func)
        if info is None:
            info = engine._ops[func] = op_info(func)
        kind = info[0]
        if kind == OP_SKIP:
            return func(*args, **kwargs)
        if kind == OP_SIZED:
            before = engine._sizes_before(args, kwargs, info)
            out = func(*args, **kwargs)
            engine._after(False, args, kwargs, out, before)
            return out
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            # inlined fast path: one output, the common case
            try:
                st = out.untyped_storage()
            except (RuntimeError, NotImplementedError, TypeError, AttributeError):
                return out
            key = st._cdata
            if key in engine._refs:
                return out
            # a storage only this output (and our `st`) references cannot be an input's
            if kind == OP_NEW and (_use_count is None or _use_count(key) > 2):
                for a in args:
                    if isinstance(a, torch.Tensor):
                        if _key(a) == key:
                            return out
                    elif isinstance(a, (list, tuple)) and key in engine._input_keys(a, None):
                        return out
            engine._add(st, key, out)
        else:
            engine._after(kind == OP_FRESH, args, kwargs, out, None)
        return out


class EngineCounter:
    """The engine's live/peak bytes for one device type (the Tracker's counter protocol)."""

    def __init__(self, engine: Engine, dev: str) -> None:
        self._engine = engine
        self._dev = dev

    def current(self) -> int:
        return self._engine.live.get(self._dev, 0)

    def peak(self) -> int:
        return self._engine.peak.get(self._dev, 0)

    def reset_peak(self) -> None:
        with self._engine._lock:
            self._engine.peak[self._dev] = self._engine.live.get(self._dev, 0)


class Engine:
    """Bytes of storages created while active, per device type (``"cpu"``, ``"mps"``...),
    plus the storages a ledger registered.

    Attributes:
        live: device type -> bytes of counted storages still alive.
        peak: device type -> highest ``live`` since the last ``reset_peak``.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._refs: dict[int, _StorageRef] = {}
        self._users: dict[str, int] = {}
        self._ops: dict[Any, OpInfo] = {}
        self._tls = threading.local()
        self._warm = False
        self._callback = self._on_free
        #: device types whose counted storages stay counted after the last tracker
        #: ends (the ledger of :mod:`torchmem.collect._ledger`), and the gc collection
        #: counts when each ledger was last known complete (None: not known)
        self._kept: set[str] = set()
        self._stamp: dict[str, tuple[int, ...] | None] = {}
        self._synced: set[str] = set()
        self.live: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        #: told of every counted storage's birth, growth and death (``created(ref, t)``,
        #: ``resized(ref, grow)``, ``freed(ref)``), outside the lock; None: nobody asks
        self.observer: Any = None

    # -- life cycle ----------------------------------------------------------------
    def acquire(self, dev: str) -> EngineCounter:
        """Start counting storages of device type ``dev`` on this thread."""
        with self._lock:
            self._users[dev] = self._users.get(dev, 0) + 1
            self.live.setdefault(dev, 0)
            self.peak.setdefault(dev, 0)
        depth = getattr(self._tls, "depth", 0)
        if depth == 0:
            mode = _Mode(self)
            mode.__enter__()
            self._tls.mode = mode
            if not self._warm:
                # torch imports its Python-dispatch machinery on the first op a mode
                # sees (seconds, once per process): pay it here, before any baseline.
                self._warm = True
                torch.empty(0).add_(0)
        self._tls.depth = depth + 1
        return EngineCounter(self, dev)

    def release(self, dev: str) -> None:
        """Undo one :meth:`acquire` (same thread); forget ``dev`` when its last user goes."""
        depth = getattr(self._tls, "depth", 0)
        if depth == 1:
            mode = self._tls.mode
            self._tls.mode = None
            mode.__exit__(None, None, None)
        self._tls.depth = max(depth - 1, 0)
        dropped: list[_StorageRef] = []
        with self._lock:
            users = self._users.get(dev, 0) - 1
            if users > 0:
                self._users[dev] = users
                return
            self._users.pop(dev, None)
            if dev in self._kept:
                return  # the ledger keeps counting (frees only) until forget()
            dropped = self._drop(dev)
        del dropped  # dropping the refs cancels their callbacks (outside the lock)

    def _drop(self, dev: str) -> list[_StorageRef]:
        dropped = [self._refs.pop(k) for k, r in list(self._refs.items()) if r.dev == dev]
        self.live.pop(dev, None)
        self.peak.pop(dev, None)
        return dropped

    def forget(self, dev: str | None = None) -> None:
        """Drop the ledger of ``dev`` (every device when ``None``): its storages stop
        being counted; the next exact tracker takes a full census again."""
        dropped: list[_StorageRef] = []
        with self._lock:
            for d in [dev] if dev is not None else list(self._kept):
                self._kept.discard(d)
                self._stamp.pop(d, None)
                self._synced.discard(d)
                if d not in self._users:
                    dropped.extend(self._drop(d))
        del dropped

    def keep(self, dev: str) -> None:
        """Keep counting ``dev``'s storages (their frees) after the last tracker ends."""
        with self._lock:
            self._kept.add(dev)
            self.live.setdefault(dev, 0)
            self.peak.setdefault(dev, self.live[dev])

    def register(self, st: Any, dev: str) -> bool:
        """Count a storage that already exists (found by the ledger's scans).

        Returns:
            True if it was new to the engine.
        """
        key = int(st._cdata)
        if key in self._refs:
            return False
        n = int(st.nbytes())
        ref = _StorageRef(st, self._callback)
        ref.key, ref.nbytes, ref.dev = key, n, dev
        with self._lock:
            if key in self._refs:
                return False
            self._refs[key] = ref
            live = self.live.get(dev, 0) + n
            self.live[dev] = live
            if live > self.peak.get(dev, 0):
                self.peak[dev] = live
        return True

    @property
    def tracked(self) -> int:
        """Number of storages currently counted."""
        return len(self._refs)

    # -- per op --------------------------------------------------------------------
    def _sizes_before(self, args: Any, kwargs: Any, info: Any) -> dict[int, int]:
        written: list[torch.Tensor] = []
        for i in info[1]:
            if i < len(args):
                _tensors(args[i], written)
        for name in info[2]:
            if name in kwargs:
                _tensors(kwargs[name], written)
        sizes: dict[int, int] = {}
        for t in written:
            try:
                st = t.untyped_storage()
                sizes[int(st._cdata)] = int(st.nbytes())
            except (RuntimeError, NotImplementedError, TypeError, AttributeError):
                pass
        return sizes

    def _after(
        self, always_new: bool, args: Any, kwargs: Any, out: Any, before: dict[int, int] | None
    ) -> None:
        outputs: list[torch.Tensor] = []
        _tensors(out, outputs)
        if not outputs:
            return
        inputs: set[int] | None = None
        for t in outputs:
            try:
                st = t.untyped_storage()
            except (RuntimeError, NotImplementedError, TypeError, AttributeError):
                continue
            key = int(st._cdata)
            ref = self._refs.get(key)
            if ref is not None:
                if before is not None and key in before:
                    self._resized(ref, int(st.nbytes()))
                continue
            if before is not None and key in before:
                # an input the op wrote to; a grown storage was reallocated by the op
                if int(st.nbytes()) > before[key]:
                    self._add(st, key)
                continue
            if not always_new:
                if inputs is None:
                    inputs = self._input_keys(args, kwargs)
                if key in inputs:
                    continue  # a view of, or an in-place result on, an input
            self._add(st, key)

    @staticmethod
    def _input_keys(args: Any, kwargs: Any) -> set[int]:
        values = list(args) + (list(kwargs.values()) if kwargs else [])
        keys: set[int] = set()
        for v in values:
            items = v if isinstance(v, (list, tuple)) else (v,)
            for item in items:
                if isinstance(item, torch.Tensor):
                    k = _key(item)
                    if k is not None:
                        keys.add(k)
                elif isinstance(item, torch.UntypedStorage):  # set_(storage)
                    keys.add(int(item._cdata))
        return keys

    def _add(self, st: Any, key: int, t: torch.Tensor | None = None) -> None:
        if t is not None and type(t) in _PLAIN:  # a plain tensor's storage is on its device
            dev = "cpu" if t.is_cpu else st.device.type
        else:
            dev = st.device.type  # subclasses: FakeTensor says "cpu", its storage is meta
        if dev not in self.live:
            return  # meta/fake storages, or a device no tracker asked for
        n = int(st.nbytes())
        ref = _StorageRef(st, self._callback)  # allocate before taking the lock
        ref.key, ref.nbytes, ref.dev = key, n, dev
        with self._lock:
            if dev not in self.live:
                return
            self._refs[key] = ref
            live = self.live[dev] + n
            self.live[dev] = live
            if live > self.peak[dev]:
                self.peak[dev] = live
        observer = self.observer
        if observer is not None:
            observer.created(ref, t)

    def _resized(self, ref: _StorageRef, nbytes: int) -> None:
        with self._lock:
            grow = nbytes - ref.nbytes
            if not grow or ref.dev not in self.live:
                return
            ref.nbytes = nbytes
            live = self.live[ref.dev] + grow
            self.live[ref.dev] = live
            if live > self.peak[ref.dev]:
                self.peak[ref.dev] = live
        observer = self.observer
        if observer is not None:
            observer.resized(ref, grow)

    def _on_free(self, ref: _StorageRef) -> None:
        with self._lock:
            if self._refs.get(ref.key) is not ref:
                return
            del self._refs[ref.key]
            if ref.dev in self.live:
                self.live[ref.dev] -= ref.nbytes
        observer = self.observer
        if observer is not None:
            observer.freed(ref)


#: the process-wide engine every Tracker shares
engine = Engine()
