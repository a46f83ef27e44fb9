"""Private engine of :func:`torchmem.scope` (``engine="calls"``, the default): register
the storages that torch *calls* made from Python return.

A :class:`~torch.overrides.TorchFunctionMode` sees each call of torch's Python API --
``torch.*`` functions and factories, ``Tensor`` methods, operators and properties,
``torch.nn.functional`` -- once, at the level the user's code (or a library's Python
code) made it. A call inside another torch call is not seen: ``F.cross_entropy`` is one
call, not ``log_softmax`` plus ``nll_loss``. That is what makes it cheap (about 1.1x a
bare step for a no-op mode, against 1.8-3.2x for a dispatch mode), and it decides what
the engine can free:

* Outputs of a call (tensors, and tensors in a returned tuple, list or dict) whose
  untyped storage is neither registered nor one of the call's inputs' storages are
  *created in scope* and registered exactly as the dispatch engine registers them.
* Temporaries made inside one call and never returned (the ``log_softmax`` output that
  ``cross_entropy``'s graph saves, an LSTM's gates) are not registered, so never freed:
  the graph that holds them frees them when it dies. ``engine="dispatch"`` frees them too.
* What ``torch.autograd.grad`` / ``backward`` return or write is a gradient and is never
  registered (rule 5 of :mod:`torchmem.scope.core`).
* A call that mutates a tensor which existed before the scope (or belongs to an
  enclosing scope) is detected from the version counters of the call's tensor
  arguments, read before and after the call under grad mode: the tensor is remembered
  as touched, and the graph it may now carry is live at the exit (``total += loss``,
  ``buf[i] = h``, ``F.relu(x, inplace=True)``, ``torch.add(a, b, out=c)``).
* Inside ``optimizer.step()`` under ``no_grad`` (how every torch optimizer steps)
  nothing is registered: the state it creates is protected anyway, its temporaries die
  inside, and no-grad writes carry no graph. A step run with grad enabled
  (``differentiable=True``) is tracked like any other code.
* ``Tensor.register_hook`` and ``register_post_accumulate_grad_hook`` are calls too:
  the hook functions registered inside the scope are remembered, so the tensors their
  closures hold are not freed (no patch of ``torch.Tensor`` is needed, unlike the
  dispatch engine).
* A ``create_graph=True`` backward or ``autograd.grad`` call makes gradients whose graphs
  reach the scope's graphs from tensors no call returned; after one, the scope explains
  no reference by a dying graph, so it frees nothing that any graph saved.

Everything else (ownership rules, the accounting of references, the exit) is shared
with the dispatch engine (:mod:`torchmem.scope._engine`, :mod:`torchmem.scope._exit`).

Cost (``python benchmarks/scope.py --threads 1 --tables 0,1``): per torch call, one
Python call (the mode), a version read per tensor argument under grad mode, and a
storage lookup per returned tensor; a new storage adds the same registration as the
dispatch engine.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from torchmem.scope._engine import ThreadState, owner_of

__all__ = ["CallsMode"]

_grad_enabled = torch.is_grad_enabled
_storage_id = getattr(torch._C, "_storage_id", None)  # the StorageImpl's address
_Tensor = torch.Tensor

# torch's autograd entry points: their outputs and writes are gradients; the index of
# ``create_graph`` among their positional arguments (``Tensor.backward``: after self)
_AUTOGRAD_CALLS: dict[Any, int] = {
    torch.autograd.grad: 4,
    torch.autograd.backward: 3,
    torch.Tensor.backward: 3,
}


def _tensor_args(args: Any, kwargs: Any) -> list[torch.Tensor]:
    """The tensors among a call's arguments (inside lists and tuples one level deep)."""
    out: list[torch.Tensor] = []
    for v in args:
        if isinstance(v, _Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, _Tensor))
    if kwargs:
        for v in kwargs.values():
            if isinstance(v, _Tensor):
                out.append(v)
            elif isinstance(v, (list, tuple)):
                out.extend(x for x in v if isinstance(x, _Tensor))
    return out


def _key(t: torch.Tensor) -> int | None:
    """The storage key (``untyped_storage()._cdata``), read without a torch call that
    the mode would see and without making a Python storage object."""
    try:
        if _storage_id is not None:
            return int(_storage_id(t))
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return None  # sparse, nested, wrapper subclasses: no plain storage


def _creates_graph(func: Any, args: Any, kwargs: Any) -> bool:
    index = _AUTOGRAD_CALLS[func]
    if kwargs and kwargs.get("create_graph"):
        return True
    return len(args) > index and bool(args[index])


# hook registrations: the hook functions are remembered until the scope's exit, because
# the tensors their closures capture are read by a backward pass that may run later
_HOOK_CALLS = frozenset(
    getattr(torch.Tensor, name) for name in ("register_hook", "register_post_accumulate_grad_hook")
    if hasattr(torch.Tensor, name)
)

_OTHER, _GETTER, _AUTOGRAD, _HOOK = 0, 1, 2, 3


def _kind(func: Any) -> int:
    if getattr(func, "__name__", None) == "__get__":
        return _GETTER  # a property (``.grad``, ``.T``, ``.data``): it makes no storage
    try:
        if func in _HOOK_CALLS:
            return _HOOK
        return _AUTOGRAD if func in _AUTOGRAD_CALLS else _OTHER
    except TypeError:  # unhashable
        return _OTHER


#: func -> _OTHER, _GETTER, _AUTOGRAD or _HOOK, shared by every mode (a scope per
#: training step would otherwise classify the same functions again at every step)
_KINDS: dict[Any, int] = {}


class CallsMode(TorchFunctionMode):
    """Registers what torch calls return; remembers what they mutate. Thread-local."""

    def __init__(self, st: ThreadState) -> None:
        super().__init__()
        self.state = st
        self.kinds = _KINDS

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        st = self.state
        if kwargs is None:
            kwargs = {}
        if st.paused or not st.stack:
            return func(*args, **kwargs)
        try:
            kind = self.kinds.get(func)
        except TypeError:  # an unhashable callable
            kind = _OTHER
        if kind is None:
            kind = self.kinds[func] = _kind(func)
        if kind:
            return self._special(kind, func, args, kwargs)
        if st.in_step and not _grad_enabled():
            # inside optimizer.step() under no_grad: nothing is mutated with a graph, the
            # state it makes is protected and its temporaries die inside
            return func(*args, **kwargs)
        if not kwargs and len(args) == 1 and isinstance(args[0], _Tensor):
            tensors = [args[0]]  # a method without arguments: x.relu(), x.sum()
        else:
            tensors = _tensor_args(args, kwargs)
        if tensors and _grad_enabled():
            versions = [t._version for t in tensors]
            out = func(*args, **kwargs)
            for t, v in zip(tensors, versions):
                if t._version != v:
                    self._mutated(t)
        else:
            out = func(*args, **kwargs)
        if isinstance(out, _Tensor):
            for t in tensors:
                if out is t:  # in-place methods return self: nothing new
                    return out
            self._see(out, tensors, None)
        elif isinstance(out, (tuple, list)):
            inputs: list[set[int] | None] = [None]
            for v in out:
                if isinstance(v, _Tensor):
                    self._see(v, tensors, inputs)
                elif isinstance(v, (tuple, list)):  # nn.LSTM: (out, (h, c))
                    for x in v:
                        if isinstance(x, _Tensor):
                            self._see(x, tensors, inputs)
        elif isinstance(out, dict):
            inputs = [None]
            for v in out.values():
                if isinstance(v, _Tensor):
                    self._see(v, tensors, inputs)
        return out

    def _special(self, kind: int, func: Any, args: Any, kwargs: Any) -> Any:
        """Properties, hook registrations and autograd entry points."""
        if kind == _HOOK:
            owner = owner_of(self.state.stack)
            hook = args[1] if len(args) > 1 else kwargs.get("hook")
            if owner is not None and hook is not None:
                owner._hook_fns.append(hook)
        elif kind == _AUTOGRAD and _creates_graph(func, args, kwargs):
            owner = owner_of(self.state.stack)
            if owner is not None:
                owner._graphs_escape = True
        return func(*args, **kwargs)

    def _mutated(self, t: torch.Tensor) -> None:
        """``t`` was written by the call: remember it unless this scope made it."""
        st = self.state
        key = _key(t)
        entry = st.entries.get(key) if key is not None else None
        if entry is None or entry.owner is not owner_of(st.stack):
            st.touch(t)

    def _see(self, t: torch.Tensor, tensors: list[torch.Tensor],
             inputs: list[set[int] | None] | None) -> None:
        key = _key(t)
        if key is None:
            return
        st = self.state
        entry = st.entries.get(key)
        if entry is not None:
            refs = entry.tensors
            ref = refs.get(id(t))
            if ref is None or ref() is not t:
                refs[id(t)] = weakref.ref(t)
            return
        if t.is_meta:
            return
        if tensors:
            if inputs is None:
                keys = {_key(x) for x in tensors}
            else:
                keys = inputs[0]
                if keys is None:
                    keys = inputs[0] = {_key(x) for x in tensors}
            if key in keys:  # a view of, an alias of, or an in-place result on an input
                return
        st.register(t.untyped_storage(), key, t)

