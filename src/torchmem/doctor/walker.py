"""The object walk under the doctor's snapshot: from named roots down to tensors and graphs.

From each root the walker follows lists, tuples, deques, sets, dicts, object
``__dict__``/``__slots__``, ``nn.Module`` children/buffers/hook dicts, closure cells, bound
methods, partials, exceptions and their traceback frames, generators, numpy arrays'
``.base`` (the tensor that ``t.numpy()`` shares memory with) -- down to tensors, and from
tensors through their ``grad_fn`` graphs to the tensors saved for backward.
Every object is attributed to the first path that reaches it (see
:mod:`torchmem.doctor.culprit` for the snapshot built from it).

Other objects whose class is implemented in C (``itertools.cycle``, ``map``, an
``lru_cache`` wrapper, extension types) are opened with ``gc.get_referents``, with the
path step ``.<internal TYPE>`` (:mod:`torchmem.doctor.internals`), after every named root
(:meth:`_Walker.finish`): what a variable also reaches is the variable's.
"""

from __future__ import annotations

import functools
import types
import weakref
from collections import deque
from typing import Any, Callable

import torch

from torchmem.collect.graph import storage_key, storage_nbytes
from torchmem.doctor.class_walk import ClassRoots, class_file, walk_classes
from torchmem.doctor.graph_walk import walk_graph
from torchmem.doctor.internals import NOT_ARRAY, array_base, internal_refs, native
from torchmem.doctor.item_sizes import estimated_bytes, last_item_type
from torchmem.doctor.lru_caches import cache_origin
from torchmem.doctor.object_hops import ObjectHops, below_hook
from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.roots import _ATOMIC, _frame_locals
from torchmem.doctor.value_kinds import value_kinds

_SKIP_CLASS_MODULES = ("logging", "threading", "_thread", "io", "_io", "socket", "subprocess",
                       "multiprocessing", "concurrent", "asyncio", "tqdm", "torch.utils.data",
                       "torch._", "torch.fx", "torch.jit", "torch.distributed", "torchmem")
_MAX_KEYS_TRACKED = 64
# nn.Parameter's metaclass makes isinstance() slow (Python-level __instancecheck__)
_PARAM_TYPES = frozenset(c for c in (torch.nn.Parameter,
                                     getattr(torch.nn.parameter, "UninitializedParameter", None))
                         if c is not None)
_storage_id = getattr(torch._C, "_storage_id", None)


def _fast_key(t: torch.Tensor) -> int | None:
    """Same value as :func:`storage_key`, through torch's C helper when it exists."""
    if _storage_id is not None and type(t) is torch.Tensor and t.layout == torch.strided \
            and not t.is_meta:
        try:
            return int(_storage_id(t))
        except Exception:  # noqa: BLE001 - odd tensor: the careful path
            pass
    return storage_key(t)


#: the deepest named path (a module's hook dict one level deeper: hooks registered on a
#: module found at this depth are named at their dict)
_TRACK_DEPTH = 3
#: tensors sampled per path (weakly) to tell, at the next snapshot, whether it kept them
_SAMPLES_PER_PATH = 4


def _fmt_key(key: Any) -> str | None:
    if isinstance(key, str):
        return repr(key)
    if isinstance(key, (int, bool)):
        return str(key)
    return None


class _Walker(ObjectHops):
    """One walk. Holds objects only while :func:`take_snapshot` runs."""

    def __init__(self, step: int, is_user: Callable[[str], bool], max_objects: int,
                 max_nodes: int) -> None:
        self.snap = Snapshot(step)
        self.is_user = is_user
        self.max_objects = max_objects
        self.max_nodes = max_nodes
        self.seen: set[int] = set()
        self.keep: list[Any] = []  # keeps visited objects alive so ids stay unique
        self.storages: set[int] = set()
        self.nodes_seen: set[int] = set()
        self.node_keep: list[Any] = []
        self.owned: dict[int, int] = {}
        self.ancestors: list[PathStats] = []
        #: path -> weak references to the first tensors first reached through it (set
        #: ``samples`` to a dict to collect them; see :attr:`PathStats.survived`)
        self.samples: dict[str, list[Any]] | None = None
        self._leaf_type: type | None = None
        #: internal references of C objects, walked after the named roots (:meth:`finish`)
        self.internal: list[tuple[Any, str, PathStats, list[PathStats], int, str]] = []
        #: modules' hook dicts, whose hooks are walked after the named roots (:meth:`finish`)
        self.hook_dicts: list[tuple[Any, PathStats, list[PathStats], int, str]] = []
        #: the script's classes met (bound to names, or classes of objects walked)
        self.classes = ClassRoots(is_user)

    # -- bookkeeping ------------------------------------------------------------
    def _stats(self, path: str, kind: str, obj: Any, depth: int, root: str, **extra: Any) -> PathStats:
        stats = PathStats(path=path, kind=kind, type=type(obj).__name__, depth=depth, root=root,
                          **extra)
        if isinstance(obj, (list, tuple, dict, set, frozenset, deque)):
            stats.items = len(obj)
            stats.item_bytes = estimated_bytes(obj)
            stats.item_type = last_item_type(obj)
            if type(obj) in (list, deque) and obj:
                stats.ends = (id(obj[0]), id(obj[-1]))
            if isinstance(obj, deque):
                stats.capacity = obj.maxlen
        stats.holds = value_kinds(obj)
        stats.cache = cache_origin(obj)
        self.snap.paths[path] = stats
        return stats

    def _add(self, tracked: list[PathStats], attr: str, value: int) -> None:
        for s in tracked:
            setattr(s, attr, getattr(s, attr) + value)

    # -- tensors and graphs -------------------------------------------------------
    def _tensor(self, t: torch.Tensor, tracked: list[PathStats], param: bool = False) -> None:
        """Count ``t`` for the tracked paths once per storage. Parameters count only when
        reached as a module's own (``param``): a model no top-level name owns (kept in a
        cache's keys, a list of trials) keeps them; elsewhere a parameter is the model's."""
        key = _fast_key(t)
        if key is None or key in self.owned or (type(t) in _PARAM_TYPES and not param):
            return
        if key not in self.storages:
            self.storages.add(key)
            nbytes = storage_nbytes(t)
            used = t.numel() * t.element_size()
            self._add(tracked, "tensors", 1)
            self._add(tracked, "storage_bytes", nbytes)
            self._add(tracked, "used_bytes", min(used, nbytes))
            if self.samples is not None:
                self._sample(t, tracked)
            for s in tracked:
                if nbytes > s._example_bytes:
                    s._example_bytes = nbytes
                    s.example = f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"
        fn = t.grad_fn
        if fn is not None:
            self._add(tracked, "grad_tensors", 1)
            reached = self._graph(fn, tracked)
            for s in tracked:
                if reached > s.max_chain:
                    s.max_chain = reached
                    s.chain_numel = t.numel()

    def _optimizer_state(self, opt: torch.optim.Optimizer, tracked: list[PathStats]) -> None:
        """Count the state of an optimizer that no top-level name owns (one kept in a dict
        of models, a list of trainers) and its parameters' gradients: each optimizer's
        first step creates them, so a container that keeps optimizers that stepped grows
        by them. Owned ones (a top-level ``optimizer``) are skipped by :meth:`_tensor`."""
        try:
            states = list(opt.state.values())
            params = [p for group in opt.param_groups for p in group.get("params", ())]
        except Exception:  # noqa: BLE001 - an optimizer-like object of its own shape
            return
        before = tracked[-1].storage_bytes
        for state in states:
            if isinstance(state, dict):
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        self._tensor(value, tracked)
        for p in params:
            grad = getattr(p, "grad", None)
            if isinstance(grad, torch.Tensor):
                self._tensor(grad, tracked)
        self._add(tracked, "optimizer_bytes", tracked[-1].storage_bytes - before)

    def _sample(self, t: torch.Tensor, tracked: list[PathStats]) -> None:
        """Keep a weak reference to ``t`` for the paths that still want samples."""
        samples = self.samples
        assert samples is not None
        ref = None
        for s in tracked:
            refs = samples.setdefault(s.path, [])
            if len(refs) < _SAMPLES_PER_PATH:
                if ref is None:
                    try:
                        ref = weakref.ref(t)
                    except TypeError:  # a tensor type without weak references
                        return
                refs.append(ref)

    def _graph(self, root: Any, tracked: list[PathStats]) -> int:
        """Walk the graph under ``root`` (nodes not seen yet); return the new nodes."""
        counts = walk_graph(self, root)
        self._add(tracked, "graph_nodes", counts.nodes)
        self._add(tracked, "saved_bytes", counts.saved_bytes)
        self._add(tracked, "live_nodes", counts.live)
        self._add(tracked, "freed_nodes", counts.freed)
        for s in tracked:
            if counts.passes > s.passes:
                s.passes = counts.passes
        return counts.nodes

    def walk_grad(self, path: str, grad: torch.Tensor, function: str | None,
                  file: str | None) -> None:
        """Measure the graph a parameter's ``.grad`` carries (``backward(create_graph=True)``).

        The gradient's storage is owned memory; its ``grad_fn`` graph is not: it is what
        ``net.weight.grad`` keeps alive, and it chains every step whose gradient was
        accumulated into it.
        """
        fn = grad.grad_fn
        if fn is None or id(grad) in self.seen:
            return
        stats = self._stats(path, "grad", grad, 0, path, function=function, file=file)
        stats.tensors = stats.grad_tensors = 1
        stats.example = f"{tuple(grad.shape)} {str(grad.dtype).replace('torch.', '')}"
        reached = self._graph(fn, [stats])
        stats.max_chain, stats.chain_numel = reached, grad.numel()

    # -- the object walk ------------------------------------------------------------
    def walk_root(self, name: str, obj: Any, kind: str, function: str | None,
                  file: str | None) -> None:
        if id(obj) in self.seen or isinstance(obj, _ATOMIC):
            return
        shadowed = self.snap.paths.get(name)
        if shadowed is not None and shadowed.depth == 0:
            # the same name bound in an inner frame, walked first: one path for both (a
            # second PathStats would replace the inner one and hide what it accumulates)
            self._walk(obj, shadowed, [shadowed], 0, name)
            return
        stats = self._stats(name, kind, obj, 0, name, function=function, file=file)
        self._walk(obj, stats, [stats], 0, name)

    def _child(self, obj: Any, path: str, kind: str, parent: PathStats, tracked: list[PathStats],
               depth: int, root: str, owner: Any = None, named: bool = True) -> tuple[PathStats, list[PathStats]]:
        if named and (depth <= _TRACK_DEPTH or (kind == "hook" and depth == _TRACK_DEPTH + 1)
                      or below_hook(tracked, depth)) \
                and path not in self.snap.paths:
            extra: dict[str, Any] = {"function": parent.function, "file": parent.file}
            if owner is not None:
                cls = type(owner)
                extra["owner_class"] = cls.__name__
                extra["owner_file"] = class_file(cls)
            elif parent.owner_file is not None:
                extra["owner_class"] = parent.owner_class
                extra["owner_file"] = parent.owner_file
            stats = self._stats(path, kind, obj, depth, root, **extra)
            return stats, tracked + [stats]
        return parent, tracked

    def _walk(self, start: Any, stats: PathStats, tracked: list[PathStats], depth: int, root: str) -> None:
        stack: list[tuple[Any, PathStats, list[PathStats], int]] = [(start, stats, tracked, depth)]
        while stack:
            obj, parent, tracked, depth = stack.pop()
            oid = id(obj)
            if oid in self.seen:
                continue
            if self.snap.objects >= self.max_objects:
                self.snap.truncated = True
                return
            self.seen.add(oid)
            self.keep.append(obj)
            self.snap.objects += 1
            push = stack.append
            path = parent.path
            if isinstance(obj, torch.Tensor):
                self._tensor(obj, tracked)
                continue
            if isinstance(obj, _ATOMIC):
                continue
            if isinstance(obj, (list, tuple, deque, set, frozenset)):
                for item in obj:
                    if not isinstance(item, _ATOMIC):
                        push((item, parent, tracked, depth))
                continue
            if isinstance(obj, dict):
                track_keys = len(obj) <= _MAX_KEYS_TRACKED
                for key in obj:  # keys keep what they hold too (a cache keyed by models)
                    if not isinstance(key, _ATOMIC):
                        push((key, parent, tracked, depth))
                for key, value in list(obj.items()):
                    if isinstance(value, _ATOMIC):
                        continue
                    shown = _fmt_key(key) if track_keys else None
                    if shown is not None:
                        s, t = self._child(value, f"{path}[{shown}]", "container", parent,
                                           tracked, depth + 1, root)
                        push((value, s, t, depth + 1))
                    else:
                        push((value, parent, tracked, depth))
                continue
            if isinstance(obj, torch.optim.Optimizer):
                self._optimizer_state(obj, tracked)
                continue
            if isinstance(obj, torch.nn.Module):
                self._module(obj, parent, tracked, depth, root, push)
                continue
            if isinstance(obj, types.FunctionType):
                code = obj.__code__
                if not self.is_user(code.co_filename):
                    continue
                for var, cell in zip(code.co_freevars, obj.__closure__ or ()):
                    try:
                        value = cell.cell_contents
                    except ValueError:
                        continue
                    if isinstance(value, _ATOMIC):
                        continue
                    s, t = self._child(value, f"{path}:{var}", "closure", parent, tracked,
                                       depth + 1, root)
                    if s is not parent:
                        s.owner_class = obj.__qualname__
                        s.owner_file = code.co_filename
                    push((value, s, t, depth + 1))
                continue
            if isinstance(obj, types.MethodType):
                push((obj.__func__, parent, tracked, depth))
                push((obj.__self__, parent, tracked, depth))
                continue
            if isinstance(obj, functools.partial):
                push((obj.func, parent, tracked, depth))
                push((obj.args, parent, tracked, depth))
                push((obj.keywords, parent, tracked, depth))
                continue
            if isinstance(obj, BaseException):
                for nxt in (obj.__traceback__, obj.__context__, obj.__cause__, obj.args):
                    if nxt is not None:
                        push((nxt, parent, tracked, depth))
                continue
            if isinstance(obj, types.TracebackType):
                tb: types.TracebackType | None = obj
                while tb is not None:
                    push((tb.tb_frame, parent, tracked, depth))
                    tb = tb.tb_next
                continue
            if isinstance(obj, types.FrameType):
                if self.is_user(obj.f_code.co_filename) and obj.f_code.co_name != "<module>":
                    for value in _frame_locals(obj).values():
                        if not isinstance(value, _ATOMIC):
                            push((value, parent, tracked, depth))
                continue
            if isinstance(obj, types.GeneratorType):
                if obj.gi_frame is not None:
                    push((obj.gi_frame, parent, tracked, depth))
                continue
            if isinstance(obj, types.CellType):
                try:
                    push((obj.cell_contents, parent, tracked, depth))
                except ValueError:
                    pass
                continue
            cls = type(obj)
            modname = getattr(cls, "__module__", "") or ""
            base = array_base(obj)
            if base is not NOT_ARRAY:  # `t.numpy()` keeps `t` as its `.base`
                if isinstance(base, torch.Tensor):
                    before = tracked[-1].storage_bytes
                    self._tensor(base, tracked)
                    self._add(tracked, "array_bytes", tracked[-1].storage_bytes - before)
                elif base is not None and not isinstance(base, _ATOMIC):
                    push((base, parent, tracked, depth))
                continue
            if modname.startswith(_SKIP_CLASS_MODULES) and not isinstance(obj, torch.utils.data.Dataset):
                continue
            covered = self._attributes(obj, parent, tracked, depth, root, push)
            if native(cls):  # what it references beyond its attributes: for finish()
                self.internal.extend((ref, parent.path + step, parent, tracked, depth + 1, root)
                                     for ref, step in internal_refs(obj, covered))

    def finish(self) -> None:
        """Walk what modules' hooks reach, the script's classes met
        (:mod:`torchmem.doctor.class_walk`), then what C objects reference internally
        (noted during the walk), once every named root has been walked: what a variable
        reaches stays the variable's. Opening those may note more; they are walked in
        turn, within the walk's budget."""
        while self.hook_dicts or self.internal or self.classes.pending:
            hooks, self.hook_dicts = self.hook_dicts, []
            for obj, s, t, depth, root in hooks:
                if self.snap.truncated:
                    break
                self._walk(obj, s, t, depth, root)
            if self.hook_dicts and not self.snap.truncated:
                continue  # hooks of the modules those hooks reach, before the rest
            walk_classes(self)
            pending, self.internal = self.internal, []
            for obj, path, parent, tracked, depth, root in pending:
                if self.snap.truncated:
                    break
                if id(obj) in self.seen:
                    continue
                s, t = self._child(obj, path, "internal", parent, tracked, depth, root)
                self._walk(obj, s, t, depth, root)
            if self.snap.truncated:
                self.internal.clear()
                self.hook_dicts.clear()
                self.classes.clear()
                return
