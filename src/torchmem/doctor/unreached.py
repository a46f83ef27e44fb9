"""Live tensors that no variable of the script reaches, and the leaves autograd itself holds.

The doctor's walk (:mod:`torchmem.doctor.walker`) measures what the script's variables
reach. Memory can also be held where no Python path leads:

* ``backward(create_graph=True)`` gives every leaf of the graph a ``.grad`` that carries a
  ``grad_fn``, and that graph leads back to the leaf: ``x -> x.grad -> grad_fn -> ... ->
  x`` is a cycle inside autograd's C++ that neither reference counting nor ``gc`` frees.
  When the script drops ``x``, torch keeps its Python object alive (the C++ tensor still
  needs it), so the gc scan still lists it: a leaf whose gradient has a ``grad_fn`` and
  that no walked path reaches is such a cycle. :class:`LeafNames` remembers, weakly, the
  name each leaf had in the frame that called ``backward``, so the report can say
  ``merged`` instead of "a tensor".
* memory that is no tensor at all (TorchScript's compiled code, C++ autograd metadata,
  leaks inside torch): the heap grows while the tensor bytes measured here stay flat.

:func:`measure_unreached` returns plain numbers (:class:`Unreached`).

Cost: one listing of every gc-tracked object of the process (about 20 ms with torch
imported: some 290,000 objects, whatever the script holds) plus a pass over the live
tensors (about 1 us each), one ``named_parameters()`` pass over the script's top-level
modules, and at each ``backward(create_graph=True)`` a read of the calling frames' locals.
:class:`UnreachedSchedule` keeps the listing off the snapshots where it cannot tell anything
new, so a run whose memory stays flat pays it once.
"""

from __future__ import annotations

import gc
import types
import weakref
from typing import Any, Callable, Iterable

import torch

from torchmem.collect.graph import held_by_own_graph, storage_nbytes
from torchmem.doctor.pathstats import Unreached
from torchmem.doctor.roots import read_locals
from torchmem.doctor.walker import _PARAM_TYPES, _fast_key

__all__ = ["LeafNames", "UnreachedSchedule", "measure_unreached", "named_modules",
           "tensor_bytes"]

#: frames read (innermost user frame outwards) when naming the leaves of a backward
_NAMING_FRAMES = 3


class LeafNames:
    """Weakly remembers the name a leaf tensor had where ``backward(create_graph=True)`` ran.

    Holds weak references only: a recorded tensor dies exactly when it would have.

    Args:
        limit: most leaves remembered at once (dead ones are dropped by :meth:`prune`).
    """

    def __init__(self, limit: int = 512) -> None:
        self.limit = limit
        self.active = False  # a backward(create_graph=True) was recorded
        self._refs: dict[int, tuple[weakref.ref[torch.Tensor], str]] = {}

    def __len__(self) -> int:
        return len(self._refs)

    def record(self, frame: types.FrameType | None, is_user: Callable[[str], bool]) -> None:
        """Remember the leaf tensors that require grad among the locals of ``frame`` and
        the user frames that called it (parameters excluded: they have paths)."""
        self.active = True
        depth = 0
        while frame is not None and depth < _NAMING_FRAMES and len(self._refs) < self.limit:
            if is_user(frame.f_code.co_filename) and frame.f_code.co_name != "<module>":
                names = read_locals(frame)
                depth += 1
            elif is_user(frame.f_code.co_filename):
                names = dict(frame.f_globals)
                depth = _NAMING_FRAMES  # the module is the outermost frame worth reading
            else:
                names = {}
            for name, value in names.items():
                if (isinstance(value, torch.Tensor) and type(value) not in _PARAM_TYPES
                        and value.is_leaf and value.requires_grad and id(value) not in self._refs):
                    try:
                        self._refs[id(value)] = (weakref.ref(value), name)
                    except TypeError:
                        continue
            names.clear()
            frame = frame.f_back

    def record_paths(self, samples: dict[str, list[Any]], tensor_paths: set[str]) -> None:
        """Name, from a snapshot's watched tensors (path -> weak references, at analysis
        time only, once a ``backward(create_graph=True)`` was recorded), the leaves whose
        ``.grad`` carries a ``grad_fn`` and that no local of the ``backward`` frames named:
        by the path of the tensor itself (``opt.hyper['lr']``, one of ``tensor_paths``),
        else by the deepest container that holds it, written ``<path>[...]``."""
        if not self.active:
            return
        best: dict[int, tuple[Any, str]] = {}
        for path, refs in samples.items():
            rank = (path in tensor_paths, len(path))
            for ref in refs:
                t = ref()
                if t is None or id(t) in self._refs or type(t) in _PARAM_TYPES \
                        or not (t.is_leaf and t.requires_grad):
                    t = None
                    continue
                g = t.grad
                old = best.get(id(t))
                if g is not None and g.grad_fn is not None and (
                        old is None or rank > (old[1] in tensor_paths, len(old[1]))):
                    best[id(t)] = (ref, path)
                t = g = None  # keep nothing alive
        for key, (ref, path) in best.items():
            if len(self._refs) >= self.limit:
                break
            self._refs[key] = (ref, path if path in tensor_paths else f"{path}[...]")

    def name_of(self, t: torch.Tensor) -> str | None:
        """The recorded name of ``t`` (None when it was not recorded)."""
        entry = self._refs.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def prune(self) -> None:
        """Forget the leaves that died."""
        for key in [k for k, (ref, _) in self._refs.items() if ref() is None]:
            del self._refs[key]


class UnreachedSchedule:
    """Decides at which snapshots :func:`measure_unreached` runs.

    What it measures changes only when memory does: the live tensors no path reaches, the
    tensor bytes and the gc object count of a run whose readings stay flat are those of the
    last measurement. So it runs at the first snapshot (the baseline), at every snapshot
    after a ``backward(create_graph=True)`` (the ``.grad`` cycles it counts hold no
    reading's worth of memory when the leaves are small), and when some device's reading
    (C heap, CUDA allocated) has grown since the last measurement by at least
    ``min_per_step`` per step on average and by at least ``min_rise`` (the noise of heap
    readings); the findings built on it (:mod:`torchmem.doctor.held`) compare its first
    and latest values and need growth of at least twice ``min_per_step``.

    Args:
        min_per_step: bytes per step of growth that make a new measurement due...
        min_rise: ...and the least growth that does.
    """

    def __init__(self, min_per_step: float, min_rise: int = 256 * 1024) -> None:
        self.min_per_step = min_per_step
        self.min_rise = min_rise
        self._last: tuple[int, dict[str, int]] | None = None  # (step, readings) measured

    def reset(self) -> None:
        """Start again (the step source changed: the next snapshot is a new baseline)."""
        self._last = None

    def due(self, step: int, used: dict[str, int], create_graph: bool) -> bool:
        """Measure at this snapshot (step ``step``, readings ``used``)? Records a yes."""
        last = self._last
        grown = last is None or create_graph or any(
            value - last[1].get(device, value)
            >= max(self.min_per_step * max(step - last[0], 1), self.min_rise)
            for device, value in used.items())
        if grown:
            self._last = (step, dict(used))
        return grown


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of the storages behind ``t`` (the index and value tensors of a sparse one)."""
    if t.layout == torch.strided:
        return storage_nbytes(t)
    from torchmem.collect.tensor_classes import sparse_parts

    return sum(storage_nbytes(p) for p in sparse_parts(t))


def named_modules(namespaces: Iterable[tuple[list[tuple[str, Any]], str, str, str]]
                  ) -> list[tuple[str, torch.nn.Module, str, str]]:
    """(path, module, function, file) of the modules among the namespaces' variables and
    their attributes one level down (``model``, ``self.net``), each module once."""
    out: list[tuple[str, torch.nn.Module, str, str]] = []
    seen: set[int] = set()
    for items, _, function, file in namespaces:
        for name, value in items:
            found = [(name, value)]
            if not isinstance(value, torch.nn.Module) and hasattr(value, "__dict__") \
                    and not isinstance(value, (type, types.ModuleType, torch.Tensor)):
                try:
                    found += [(f"{name}.{k}", v) for k, v in vars(value).items()
                              if isinstance(v, torch.nn.Module)]
                except TypeError:
                    pass
            for path, obj in found:
                if isinstance(obj, torch.nn.Module) and id(obj) not in seen:
                    seen.add(id(obj))
                    out.append((path, obj, function, file))
    return out


def measure_unreached(reached: set[int], owned: dict[int, int], names: LeafNames,
                      modules: list[tuple[str, torch.nn.Module]],
                      seen: set[int] = frozenset()) -> Unreached:  # type: ignore[assignment]
    """Measure the live tensors that neither ``reached`` nor ``owned`` storages cover.

    Args:
        reached: storage keys the walk reached from the script's variables.
        owned: storage keys of parameters, gradients, optimizer state and buffers.
        names: the leaves recorded at ``backward(create_graph=True)`` calls.
        modules: (path, module) of the script's modules, for :attr:`Unreached.param_grads`.
        seen: ids of the objects the walk visited (alive while this runs). A leaf is in
            a ``.grad`` cycle when the walk did not visit it and its gradient's storage
            is reached by nothing (the leaf itself may be a view of a reached storage).
    """
    from torchmem.collect.live import scan

    out = Unreached()
    sizes: dict[int, int] = {}
    found = scan(include_graphs=False, frozen_grads=False)
    listed = found.gc_objects
    try:
        for t in found.tensors:
            key = _fast_key(t)
            if key is None or key in sizes:
                continue
            nbytes = storage_nbytes(t)
            sizes[key] = nbytes
            out.tensor_bytes += nbytes
            if key not in reached and key not in owned:
                out.tensors += 1
                out.bytes += nbytes
                if t.grad_fn is not None:
                    out.graph_tensors += 1
                    out.self_held += held_by_own_graph(t)
        for leaf, grad in zip(found.grad_owners, found.grads):
            gkey = _fast_key(grad)
            if gkey is not None and gkey not in sizes:
                sizes[gkey] = storage_nbytes(grad)
                out.tensor_bytes += sizes[gkey]
            if grad.grad_fn is None or id(leaf) in seen or gkey is None or gkey in reached \
                    or gkey in owned:
                continue
            key = _fast_key(leaf)
            out.grad_cycles += 1
            leaf_bytes = sizes.get(key, 0) if key is not None and key not in reached else 0
            out.grad_cycle_bytes += leaf_bytes + sizes.get(gkey, 0)
            name = names.name_of(leaf)
            if name is not None:
                out.grad_cycle_names[name] = out.grad_cycle_names.get(name, 0) + 1
    finally:
        found.clear()
    for path, module in modules:
        for pname, p in module.named_parameters():
            g = p.grad
            if g is not None:
                out.param_grads[f"{path}.{pname}"] = (tensor_bytes(g),
                                                      str(g.layout).replace("torch.", ""))
            del g
    # the scan's own listing: a second whole-heap listing only to count would double the cost
    out.gc_objects = listed if listed is not None else len(gc.get_objects())
    return out
