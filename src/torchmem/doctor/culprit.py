"""Walk what the script's own variables reach, and measure it per path as the user wrote it.

At a step boundary the doctor looks at the live user state: the locals of every user
frame on the stack (innermost first, so ``self`` of the method that called
``optimizer.step()`` comes first), the script's module globals, the globals of other
user modules, and torch's global module hooks. From each root it walks the Python
object graph -- lists, tuples, deques, sets, dicts, object ``__dict__``/``__slots__``,
``nn.Module`` children/buffers/hook dicts, closure cells, bound methods, partials,
exceptions and their traceback frames, generators -- down to tensors, and from tensors
through their ``grad_fn`` autograd graphs to the tensors saved for backward.

Every object is attributed to the first path that reaches it, and the result is a
:class:`Snapshot`: for each *named* path (``losses``, ``self.history``,
``metrics['loss']``, ``model.memory``, ``callback:out``) the counts and bytes it holds.
It contains only strings and integers: no tensor, no object of the script.

Owned memory is excluded: parameters, their gradients, optimizer state and buffers are
what every healthy loop holds; only what the script keeps *besides* them is measured.

Cost: proportional to the objects reachable from user variables (not to all objects of
the process) plus the nodes of the autograd graphs they hold: about 1-3 us per object
and 3-6 us per graph node. It stops after ``max_objects`` objects / ``max_nodes`` nodes
and says so (``truncated``).

Known limitations:
    * Objects reachable only from C extensions, threads' frames, or library modules are
      not walked (a cache inside a third-party library is invisible).
    * On Python < 3.13 reading a running function frame's ``f_locals`` stores a dict on
      the frame; the walker empties that dict again so that it keeps nothing alive.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

from torchmem.collect.graph import _next_functions, read_saved, storage_key, storage_nbytes

__all__ = ["PathStats", "Snapshot", "take_snapshot", "owned_storages", "frame_chain",
           "read_locals"]

_ATOMIC = (str, bytes, bytearray, int, float, complex, bool, type(None), range, slice,
           types.ModuleType, type, types.BuiltinFunctionType, types.CodeType, memoryview)
_MODULE_SPECIAL = frozenset({
    "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "training",
    "_is_full_backward_hook", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
    "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks", "_compiled_call_impl",
})
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
               "_backward_pre_hooks")
_SKIP_CLASS_MODULES = ("logging", "threading", "_thread", "io", "_io", "socket", "subprocess",
                       "multiprocessing", "concurrent", "asyncio", "tqdm", "torch.utils.data",
                       "torch._", "torch.fx", "torch.jit", "torch.distributed", "torchmem")
_MAX_KEYS_TRACKED = 64
# nn.Parameter's metaclass makes isinstance() slow (Python-level __instancecheck__)
_PARAM_TYPES = frozenset(c for c in (torch.nn.Parameter,
                                     getattr(torch.nn.parameter, "UninitializedParameter", None))
                         if c is not None)
_user_modules_cache: tuple[int, list[str]] = (-1, [])
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


def _user_modules(is_user: Callable[[str], bool]) -> list[str]:
    """Names of imported modules whose file is user code (cached while sys.modules is stable)."""
    global _user_modules_cache
    n = len(sys.modules)
    if _user_modules_cache[0] != n:
        import site
        import sysconfig

        libs = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")}
        try:
            libs.update(site.getsitepackages())
        except AttributeError:  # virtualenvs of old
            pass
        prefixes = tuple(os.path.join(os.path.realpath(d), "") for d in libs if d)
        names = []
        for name, mod in list(sys.modules.items()):
            file = getattr(mod, "__file__", None)
            if (isinstance(file, str) and name != "__main__" and is_user(file)
                    and not os.path.realpath(file).startswith(prefixes)):
                names.append(name)
        _user_modules_cache = (n, names)
    return _user_modules_cache[1]
_TRACK_DEPTH = 3


@dataclass
class PathStats:
    """What one named path holds at a step boundary (plain data).

    Attributes:
        path: the expression as the user writes it (``self.history``).
        kind: ``local``, ``global``, ``attribute``, ``container``, ``closure`` or ``hook``.
        type: type name of the object at the path.
        depth: 0 for a variable, +1 per attribute/key/closure hop.
        root: the variable the path starts from.
        function: the function whose frame holds the root (``<module>`` for globals).
        file: that function's file (or the module file for globals).
        owner_class: for attribute paths, the class that owns the attribute.
        owner_file: the file defining ``owner_class`` (or the closure's function).
        items: ``len()`` of the object when it is a container, else None.
        tensors: tensors (by storage) first reached through this path.
        grad_tensors: of those, tensors that have a ``grad_fn``.
        storage_bytes: bytes of those tensors' storages.
        used_bytes: bytes those tensors actually use (``numel * itemsize``).
        saved_bytes: bytes of tensors saved for backward by graphs reached here.
        graph_nodes: autograd nodes reached here.
        live_nodes: nodes whose saved tensors are still there (graph never backpropagated).
        freed_nodes: nodes whose saved tensors were freed by a backward pass.
        max_chain: the most graph nodes reached from one single tensor.
        chain_numel: ``numel`` of that tensor.
        hooks: hook functions held (for module hook dicts).
        example: shape and dtype of the largest tensor reached, e.g. ``(64, 512) float32``.
        holds: what the object is made of, for the fix's validity (see :func:`value_kinds`):
            the kinds of a container's last values, or a tensor's own kind.
    """

    path: str
    kind: str
    type: str
    depth: int
    root: str
    function: str | None = None
    file: str | None = None
    owner_class: str | None = None
    owner_file: str | None = None
    items: int | None = None
    tensors: int = 0
    grad_tensors: int = 0
    storage_bytes: int = 0
    used_bytes: int = 0
    saved_bytes: int = 0
    graph_nodes: int = 0
    live_nodes: int = 0
    freed_nodes: int = 0
    max_chain: int = 0
    chain_numel: int = 0
    hooks: int = 0
    example: str | None = None
    holds: tuple[str, ...] = ()
    _example_bytes: int = 0

    @property
    def retained_bytes(self) -> int:
        """Storage bytes plus saved-for-backward bytes reached through this path."""
        return self.storage_bytes + self.saved_bytes

    @property
    def pinned_bytes(self) -> int:
        """Storage bytes the tensors here keep alive but do not use (views of bigger storages)."""
        return max(0, self.storage_bytes - self.used_bytes)


#: values of a container whose kinds :func:`value_kinds` reads (the last ones: growth appends)
_KINDS_SAMPLE = 32


def _value_kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "0-dim tensor" if value.dim() == 0 else "tensor"
    if isinstance(value, (bool, int, float, complex)):
        return "number"
    if value is None:
        return "None"
    if isinstance(value, (list, tuple, dict, set, frozenset, deque)):
        return type(value).__name__
    return "object"


def value_kinds(obj: Any) -> tuple[str, ...]:
    """The sorted kinds of what ``obj`` holds: ``0-dim tensor``, ``tensor``, ``number``,
    ``None``, a container type name or ``object``, for a container's last values; the
    kind of ``obj`` itself otherwise (a fix may call ``.item()`` only on 0-dim tensors)."""
    try:
        if isinstance(obj, dict):
            values = list(itertools.islice(reversed(obj.values()), _KINDS_SAMPLE))
        elif isinstance(obj, (list, tuple)):
            values = list(obj[-_KINDS_SAMPLE:])
        elif isinstance(obj, deque):
            values = list(itertools.islice(reversed(obj), _KINDS_SAMPLE))
        elif isinstance(obj, (set, frozenset)):
            values = list(itertools.islice(obj, _KINDS_SAMPLE))
        else:
            return (_value_kind(obj),)
        return tuple(sorted({_value_kind(v) for v in values}))
    except Exception:  # noqa: BLE001 - an odd container: no evidence
        return ()


@dataclass
class Snapshot:
    """The per-path measurement of one step boundary.

    Attributes:
        step: the step number.
        paths: path -> stats, for every named path (variables, attributes, keys).
        owned_bytes: bytes of parameters, gradients, optimizer state and buffers.
        objects: objects walked; ``nodes``: graph nodes walked.
        truncated: the walk stopped at its budget.
        elapsed_s: time the walk took.
    """

    step: int
    paths: dict[str, PathStats] = field(default_factory=dict)
    owned_bytes: int = 0
    objects: int = 0
    nodes: int = 0
    truncated: bool = False
    elapsed_s: float = 0.0


def owned_storages(objs: Iterable[Any]) -> dict[int, int]:
    """Storage keys -> bytes of what modules and optimizers among ``objs`` own."""
    owned: dict[int, int] = {}

    def add(t: Any) -> None:
        if isinstance(t, torch.Tensor):
            key = storage_key(t)
            if key is not None:
                owned[key] = storage_nbytes(t)
            g = t.grad if t.is_leaf else None
            if g is not None:
                gk = storage_key(g)
                if gk is not None:
                    owned[gk] = storage_nbytes(g)

    for obj in objs:
        if isinstance(obj, torch.nn.Module):
            for p in obj.parameters():
                add(p)
            for b in obj.buffers():
                if b.grad_fn is None:
                    add(b)
        elif isinstance(obj, torch.optim.Optimizer):
            for group in obj.param_groups:
                for p in group.get("params", ()):
                    add(p)
            for state in obj.state.values():
                if isinstance(state, dict):
                    for v in state.values():
                        add(v)
    return owned


def frame_chain(frame: types.FrameType | None, is_user: Callable[[str], bool],
                outermost: Callable[[types.FrameType], bool] | None = None) -> list[types.FrameType]:
    """The user frames from ``frame`` outwards (innermost first), up to and including
    the frame for which ``outermost`` is true when it is given."""
    out = []
    while frame is not None:
        if is_user(frame.f_code.co_filename):
            out.append(frame)
        if outermost is not None and outermost(frame):
            break
        frame = frame.f_back
    return out


def _class_file(cls: type) -> str | None:
    mod = sys.modules.get(getattr(cls, "__module__", "") or "")
    return getattr(mod, "__file__", None)


def _fmt_key(key: Any) -> str | None:
    if isinstance(key, str):
        return repr(key)
    if isinstance(key, (int, bool)):
        return str(key)
    return None


class _Walker:
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

    # -- bookkeeping ------------------------------------------------------------
    def _stats(self, path: str, kind: str, obj: Any, depth: int, root: str, **extra: Any) -> PathStats:
        stats = PathStats(path=path, kind=kind, type=type(obj).__name__, depth=depth, root=root,
                          **extra)
        if isinstance(obj, (list, tuple, dict, set, frozenset, deque)):
            stats.items = len(obj)
        stats.holds = value_kinds(obj)
        self.snap.paths[path] = stats
        return stats

    def _add(self, tracked: list[PathStats], attr: str, value: int) -> None:
        for s in tracked:
            setattr(s, attr, getattr(s, attr) + value)

    # -- tensors and graphs -------------------------------------------------------
    def _tensor(self, t: torch.Tensor, tracked: list[PathStats]) -> None:
        key = _fast_key(t)
        if key is None or key in self.owned or type(t) in _PARAM_TYPES:
            return
        if key not in self.storages:
            self.storages.add(key)
            nbytes = storage_nbytes(t)
            used = t.numel() * t.element_size()
            self._add(tracked, "tensors", 1)
            self._add(tracked, "storage_bytes", nbytes)
            self._add(tracked, "used_bytes", min(used, nbytes))
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

    def _graph(self, root: Any, tracked: list[PathStats]) -> int:
        """Walk the graph under ``root`` (nodes not seen yet); return the new nodes."""
        queue = [root]
        new = 0
        saved = live = freed = 0
        while queue:
            node = queue.pop()
            nid = id(node)
            if nid in self.nodes_seen:
                continue
            if self.snap.nodes >= self.max_nodes:
                self.snap.truncated = True
                break
            self.nodes_seen.add(nid)
            self.node_keep.append(node)
            self.snap.nodes += 1
            new += 1
            try:
                variable = getattr(node, "variable", None)
            except Exception:  # noqa: BLE001 - an odd node
                variable = None
            if isinstance(variable, torch.Tensor):
                continue  # AccumulateGrad: a leaf (parameter) the graph points at
            # never unpacks: no version check, no saved_tensors_hooks unpack call
            found = read_saved(node)
            for v in found.tensors:
                key = storage_key(v)
                if key is not None and key not in self.owned and key not in self.storages:
                    self.storages.add(key)
                    saved += storage_nbytes(v)
            live += found.live
            freed += found.freed
            del found
            for edge in _next_functions(node):
                nxt = edge[0] if isinstance(edge, tuple) and edge else None
                if nxt is not None and id(nxt) not in self.nodes_seen:
                    queue.append(nxt)
        self._add(tracked, "graph_nodes", new)
        self._add(tracked, "saved_bytes", saved)
        self._add(tracked, "live_nodes", live)
        self._add(tracked, "freed_nodes", freed)
        return new

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
        if named and depth <= _TRACK_DEPTH and path not in self.snap.paths:
            extra: dict[str, Any] = {"function": parent.function, "file": parent.file}
            if owner is not None:
                cls = type(owner)
                extra["owner_class"] = cls.__name__
                extra["owner_file"] = _class_file(cls)
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
            if modname.startswith(_SKIP_CLASS_MODULES) and not isinstance(obj, torch.utils.data.Dataset):
                continue
            self._attributes(obj, parent, tracked, depth, root, push)

    def _attributes(self, obj: Any, parent: PathStats, tracked: list[PathStats], depth: int,
                    root: str, push: Callable[[Any], None]) -> None:
        try:
            attrs = dict(vars(obj))
        except TypeError:
            attrs = {}
        for name in getattr(type(obj), "__slots__", ()) if not attrs else ():
            if isinstance(name, str) and hasattr(obj, name):
                attrs[name] = getattr(obj, name, None)
        for name, value in attrs.items():
            if isinstance(value, _ATOMIC) or not isinstance(name, str):
                continue
            s, t = self._child(value, f"{parent.path}.{name}", "attribute", parent, tracked,
                               depth + 1, root, owner=obj)
            push((value, s, t, depth + 1))

    def _module(self, mod: torch.nn.Module, parent: PathStats, tracked: list[PathStats],
                depth: int, root: str, push: Callable[[Any], None]) -> None:
        base = parent.path
        for name, child in mod._modules.items():
            if child is not None:
                shown = f"{base}[{name}]" if name.isdigit() else f"{base}.{name}"
                s, t = self._child(child, shown, "attribute", parent, tracked,
                                   depth + 1, root, owner=mod)
                push((child, s, t, depth + 1))
        for name, buf in mod._buffers.items():
            if buf is not None and buf.grad_fn is not None:
                s, t = self._child(buf, f"{base}.{name}", "attribute", parent, tracked,
                                   depth + 1, root, owner=mod)
                push((buf, s, t, depth + 1))
        for hook_attr in _HOOK_DICTS:
            hooks = getattr(mod, hook_attr, None)
            if hooks:
                s, t = self._child(hooks, f"{base}.{hook_attr}", "hook", parent, tracked,
                                   depth + 1, root, owner=mod)
                self._add(t, "hooks", len(hooks))
                push((hooks, s, t, depth + 1))
        for name, value in vars(mod).items():
            if name in _MODULE_SPECIAL or name in _HOOK_DICTS or isinstance(value, _ATOMIC):
                continue
            s, t = self._child(value, f"{base}.{name}", "attribute", parent, tracked,
                               depth + 1, root, owner=mod)
            push((value, s, t, depth + 1))


_CO_OPTIMIZED = 0x0001


def read_locals(frame: types.FrameType) -> dict[str, Any]:
    """A copy of a frame's locals that leaves nothing behind on the frame.

    For a function frame on Python < 3.13, reading ``f_locals`` stores a snapshot dict
    on the frame that keeps its values alive until the next read; it is emptied again
    here (every later write-back is preceded by a fresh read, so this is safe). Module,
    class-body and ``exec`` frames have a real namespace, which is only copied.
    """
    namespace = frame.f_locals
    values = dict(namespace)
    if (sys.version_info < (3, 13) and frame.f_code.co_flags & _CO_OPTIMIZED
            and namespace is not frame.f_globals):
        namespace.clear()
    return values


def _frame_locals(frame: types.FrameType) -> dict[str, Any]:
    if frame.f_code.co_name == "<module>":
        return dict(frame.f_globals)
    return read_locals(frame)


def _root_items(namespace: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in namespace.items()
            if not (k.startswith("__") and k.endswith("__")) and not isinstance(v, _ATOMIC)]


def take_snapshot(step: int, frame: types.FrameType | None, main_globals: dict[str, Any] | None,
                  is_user: Callable[[str], bool], *, max_objects: int = 300_000,
                  max_nodes: int = 200_000,
                  outermost: Callable[[types.FrameType], bool] | None = None) -> Snapshot:
    """Measure every named path reachable from the user's variables at this boundary.

    Args:
        step: the step number the snapshot belongs to.
        frame: the innermost user frame (its ``f_back`` chain is walked too).
        main_globals: the script's ``__main__`` namespace.
        is_user: decides whether a filename is user code.
        max_objects: stop after this many objects.
        max_nodes: stop after this many autograd nodes.
        outermost: the last frame of the chain to walk (see :func:`frame_chain`).

    Returns:
        A :class:`Snapshot` (plain data only).

    Example:
        >>> import sys
        >>> snap = take_snapshot(1, sys._getframe(), None, lambda f: True)  # doctest: +SKIP
    """
    import time

    t0 = time.perf_counter()
    w = _Walker(step, is_user, max_objects, max_nodes)
    frames = frame_chain(frame, is_user, outermost)
    namespaces: list[tuple[list[tuple[str, Any]], str, str, str]] = []
    for f in frames:
        is_module = f.f_code.co_name == "<module>"
        items = _root_items(_frame_locals(f))
        namespaces.append((items, "global" if is_module else "local", f.f_code.co_name,
                           f.f_code.co_filename))
    if main_globals is not None:
        namespaces.append((_root_items(main_globals), "global", "<module>",
                           str(main_globals.get("__file__") or "")))
    for modname in _user_modules(is_user):
        mod = sys.modules.get(modname)
        file = getattr(mod, "__file__", None)
        if mod is not None and file and mod.__dict__ is not main_globals:
            items = [(f"{modname}.{k}", v) for k, v in _root_items(vars(mod))]
            namespaces.append((items, "global", "<module>", file))
    from torch.nn.modules import module as _mm

    hook_roots = []
    for attr in ("_global_forward_hooks", "_global_forward_pre_hooks",
                 "_global_backward_hooks", "_global_backward_pre_hooks"):
        hooks = getattr(_mm, attr, None)
        if hooks:
            mine = {k: v for k, v in hooks.items()
                    if not (getattr(v, "__module__", "") or "").startswith("torchmem")
                    and not (getattr(getattr(v, "__self__", None), "__module__", "") or "").startswith("torchmem")}
            if mine:
                hook_roots.append((f"torch.nn.modules.module.{attr}", mine))
    # owned memory first: modules and optimizers reachable from the namespaces' top level
    tops = [v for items, *_ in namespaces for _, v in items]
    w.owned = owned_storages(v for v in tops if isinstance(v, (torch.nn.Module, torch.optim.Optimizer)))
    for items, _, _, _ in namespaces:
        for _, v in items:
            if not isinstance(v, (torch.nn.Module, torch.optim.Optimizer)) and hasattr(v, "__dict__"):
                try:
                    inner = [a for a in vars(v).values()
                             if isinstance(a, (torch.nn.Module, torch.optim.Optimizer))]
                except TypeError:
                    inner = []
                if inner:
                    w.owned.update(owned_storages(inner))
    w.snap.owned_bytes = sum(w.owned.values())
    try:
        for items, kind, function, file in namespaces:
            for name, value in items:
                w.walk_root(name, value, kind, function, file)
        for name, hooks in hook_roots:
            w.walk_root(name, hooks, "hook", "<module>", None)
            if name in w.snap.paths:
                w.snap.paths[name].hooks += len(hooks)
    finally:
        w.keep.clear()
        w.node_keep.clear()
        namespaces.clear()
        tops.clear()
        frames.clear()
    w.snap.elapsed_s = time.perf_counter() - t0
    return w.snap
