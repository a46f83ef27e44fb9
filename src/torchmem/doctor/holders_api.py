"""``torchmem.holders(x)``: the paths, as the user writes them, that keep ``x`` alive.

From the caller's frames (their locals first, innermost first), their modules' globals
and the other modules of the user's code, a breadth-first walk follows lists, tuples,
dicts, sets, object attributes and ``__slots__``, ``nn.Module`` parameters, buffers and
children, closure cells, bound methods, ``functools.partial``, ``functools.lru_cache``
caches, exceptions' tracebacks, generators, a tensor's ``.grad`` and the tensors its
``grad_fn`` graph saved for backward. Every path that reaches ``x`` is reported, shortest
first: ``self.stats.total``, ``logs['loss'][3]``, ``model.encoder.weight.grad``,
``the cache of embed`` (an ``lru_cache``), ``step.__closure__[0].cell_contents``,
``loss.grad_fn (saved for backward)``, ``err.__traceback__ (frame of train: batch)``.

A tensor is matched by its storage: a view of it keeps the same memory alive and is
reported (``detail`` says it is a view). Anything else is matched by identity.

The walk keeps the objects it visits alive only while it runs; what it returns is plain
strings and numbers, and ``x`` itself is not kept. Memory no Python path reaches (a C++
cycle such as ``x -> x.grad -> grad_fn -> x`` after ``backward(create_graph=True)``,
TorchScript's caches) has no holder here: ``torchmem doctor`` reports it.

Cost: proportional to the objects reachable from those roots (about 1-2 us each), bounded
by ``max_objects``.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import sys
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = ["holders", "Holder", "search", "Search"]

_ATOMIC = (str, bytes, bytearray, int, float, complex, bool, type(None), range, slice,
           types.BuiltinFunctionType, types.CodeType, memoryview)
_PTR = ctypes.POINTER(ctypes.c_void_p)


@dataclass(frozen=True)
class Holder:
    """One path that keeps an object alive.

    Attributes:
        path: the expression as the user writes it (``self.history[3]``).
        kind: ``local``, ``global``, ``attribute``, ``item``, ``closure``, ``cache``,
            ``grad``, ``graph`` or ``traceback``: the last hop of the path.
        detail: what the last hop is, in words (``a view of it``, ``lru_cache entry``).
        file, line, code: the statement that put it there, where it could be found.
        function: the function whose frame holds the path's root (``<module>``: global).
    """

    path: str
    kind: str
    detail: str = ""
    file: str | None = None
    line: int | None = None
    code: str | None = None
    function: str | None = None

    def __str__(self) -> str:
        where = f"  ({self.file}:{self.line}: {self.code})" if self.line else ""
        detail = f" [{self.detail}]" if self.detail else ""
        return f"{self.path}{detail}{where}"


def _lru_entries(wrapper: Any) -> Iterator[tuple[Any, Any]]:
    """(key, result) of each entry of an ``lru_cache`` wrapper's cache."""
    cache = next((o for o in gc.get_referents(wrapper)
                  if type(o) is dict and o is not getattr(wrapper, "__dict__", None)), None)
    if cache is None:
        return
    for key, value in list(cache.items()):
        if type(value).__name__ != "_lru_list_elem":
            yield key, value  # an unbounded cache maps key -> result
            continue
        # a bounded cache's link (C struct: head, prev, next, hash, key, result) exposes
        # nothing to Python; read it only where its key field checks out
        if sys.implementation.name != "cpython":
            return
        base = id(value)
        slots = [ctypes.cast(base + i * ctypes.sizeof(ctypes.c_void_p), _PTR).contents.value
                 for i in range(7)]
        if slots[5] != id(key) or not slots[6]:
            return
        yield key, ctypes.cast(slots[6], ctypes.py_object).value


def _children(obj: Any, path: str, in_graph: bool = False) -> Iterator[tuple[Any, str, str, str]]:
    """(child, path, kind, detail) one hop from ``obj`` (``in_graph``: ``obj`` was reached
    through a graph, which was walked whole already)."""
    import torch

    if isinstance(obj, torch.Tensor):
        if obj.is_leaf and obj.grad is not None:
            yield obj.grad, f"{path}.grad", "grad", ""
        fn = obj.grad_fn
        if fn is not None and not in_graph:
            from torchmem.collect.graph import iter_nodes, read_saved

            for node in iter_nodes([fn], limit=20_000):
                variable = getattr(node, "variable", None)
                if isinstance(variable, torch.Tensor):
                    yield variable, f"{path}.grad_fn", "graph", "a leaf its graph accumulates into"
                    continue
                for t in read_saved(node).tensors:
                    yield t, f"{path}.grad_fn", "graph", \
                        f"saved for backward by {type(node).__name__}"
        return
    if isinstance(obj, dict):
        for key, value in list(obj.items()):
            plain = isinstance(key, (str, int, float, bool, tuple))
            shown = repr(key) if plain else f"<{type(key).__name__}{_shape_of(key)}>"
            yield value, f"{path}[{shown}]", "item", ""
        return
    if isinstance(obj, (list, tuple, deque)):
        for i, value in enumerate(list(obj)):
            yield value, f"{path}[{i}]", "item", ""
        return
    if isinstance(obj, (set, frozenset)):
        for value in list(obj):
            yield value, path, "item", f"an element of the {type(obj).__name__}"
        return
    if isinstance(obj, torch.nn.Module):
        for name, p in obj._parameters.items():
            yield p, f"{path}.{name}", "attribute", "parameter"
        for name, b in obj._buffers.items():
            yield b, f"{path}.{name}", "attribute", "buffer"
        for name, m in obj._modules.items():
            yield m, f"{path}[{name}]" if name.isdigit() else f"{path}.{name}", "attribute", ""
    if type(obj).__name__ == "_lru_cache_wrapper":
        for key, result in _lru_entries(obj):
            yield result, f"the cache of {path}", "cache", f"lru_cache entry for {key!r:.60}"
        yield obj.__wrapped__, path, "attribute", ""
        return
    if isinstance(obj, types.FunctionType):
        for i, (var, cell) in enumerate(zip(obj.__code__.co_freevars, obj.__closure__ or ())):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            yield value, f"{path}.__closure__[{i}].cell_contents", "closure", \
                f"closure variable `{var}` of {obj.__qualname__}"
        for name, value in (obj.__defaults__ and enumerate(obj.__defaults__)) or ():
            yield value, f"{path}.__defaults__[{name}]", "item", "default argument"
        return
    if isinstance(obj, types.MethodType):
        yield obj.__self__, f"{path}.__self__", "attribute", ""
        yield obj.__func__, f"{path}.__func__", "attribute", ""
        return
    if isinstance(obj, functools.partial):
        yield obj.func, f"{path}.func", "attribute", ""
        yield obj.args, f"{path}.args", "attribute", ""
        yield obj.keywords, f"{path}.keywords", "attribute", ""
        return
    if isinstance(obj, BaseException):
        yield obj.__traceback__, f"{path}.__traceback__", "traceback", ""
        yield obj.args, f"{path}.args", "attribute", ""
        return
    if isinstance(obj, types.TracebackType):
        tb: types.TracebackType | None = obj
        while tb is not None:
            frame = tb.tb_frame
            for name, value in _locals(frame).items():
                yield value, path, "traceback", f"local `{name}` of {frame.f_code.co_name}"
            tb = tb.tb_next
        return
    if isinstance(obj, types.GeneratorType) and obj.gi_frame is not None:
        for name, value in _locals(obj.gi_frame).items():
            yield value, path, "local", f"local `{name}` of the suspended generator"
        return
    if isinstance(obj, (types.ModuleType, types.FrameType)):
        return
    attrs: dict[str, Any] = {}
    try:
        attrs = dict(vars(obj))
    except TypeError:
        pass
    for name in getattr(type(obj), "__slots__", ()) if not isinstance(obj, type) else ():
        if isinstance(name, str) and hasattr(obj, name):
            attrs[name] = getattr(obj, name, None)
    for name, value in attrs.items():
        if isinstance(name, str) and not (name.startswith("__") and name.endswith("__")):
            if not (isinstance(obj, torch.nn.Module)
                    and name in ("_parameters", "_buffers", "_modules")):
                yield value, f"{path}.{name}", "attribute", ""


def _shape_of(key: Any) -> str:
    """`` (1000, 512)`` for a tensor key (an optimizer's state is keyed by parameters)."""
    import torch

    if isinstance(key, torch.Tensor):
        return " (" + ", ".join(str(d) for d in key.shape) + ")"
    return ""


def _locals(frame: types.FrameType) -> dict[str, Any]:
    from torchmem.doctor.roots import read_locals

    return read_locals(frame) if frame.f_code.co_name != "<module>" else dict(frame.f_globals)


def _roots(frame: types.FrameType | None, is_user: Callable[[str], bool] | None = None,
           main_globals: dict[str, Any] | None = None,
           ) -> list[tuple[dict[str, Any], str, str | None, str]]:
    """(namespace, kind, file, function) from ``frame`` outwards, then the script's
    ``main_globals`` (when given) and the other user modules. ``is_user`` decides which
    files are the user's (default: not torch, the standard library or installed packages).
    """
    from torchmem.doctor.roots import _user_modules

    if is_user is None:
        is_user = _default_is_user()
    out: list[tuple[dict[str, Any], str, str | None, str]] = []
    seen_globals: set[int] = set()
    chain = []
    while frame is not None:
        chain.append(frame)
        frame = frame.f_back
    for f in chain:
        if f.f_code.co_name != "<module>" and is_user(f.f_code.co_filename):
            out.append((_locals(f), "local", f.f_code.co_filename, f.f_code.co_name))
    spaces = [(f.f_globals, f.f_code.co_filename) for f in chain
              if is_user(f.f_code.co_filename)]
    if main_globals is not None:
        spaces.append((main_globals, str(main_globals.get("__file__") or "")))
    for space, file in spaces:
        if id(space) not in seen_globals:
            seen_globals.add(id(space))
            out.append((dict(space), "global", file, "<module>"))
    for name in _user_modules(is_user):
        mod = sys.modules.get(name)
        if mod is not None and id(mod.__dict__) not in seen_globals:
            seen_globals.add(id(mod.__dict__))
            items = {f"{name}.{k}": v for k, v in vars(mod).items()}
            out.append((items, "global", getattr(mod, "__file__", None), "<module>"))
    chain.clear()
    spaces.clear()
    return out


def _default_is_user() -> Callable[[str], bool]:
    import sysconfig

    from torchmem.doctor.steps import UserFrames

    libs = tuple(p for p in {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")} if p)
    frames = UserFrames()

    def is_user(file: str) -> bool:
        return frames.is_user_file(file) and not file.startswith(libs)

    return is_user


def _statement(path: str, file: str | None, function: str) -> Any:
    if not file:
        return None
    from torchmem.doctor.source import best_statement, find_statements

    root = path.split(".__closure__")[0].removeprefix("the cache of ")
    try:
        found = find_statements(root, [file])
    except Exception:  # noqa: BLE001 - an unreadable or odd file: no line
        return None
    return (best_statement(found, "container", function=function, exact=root)
            or best_statement(found, "chain", function=function, exact=root))


def holders(obj: Any, *, max_paths: int = 10, max_objects: int = 200_000) -> list[Holder]:
    """The paths from the caller's variables that keep ``obj`` alive, shortest first.

    Args:
        obj: a tensor (matched by storage: views count), an untyped storage, or any object
            (matched by identity).
        max_paths: stop after this many holders.
        max_objects: stop after visiting this many objects.

    Returns:
        :class:`Holder` objects (plain data; none keeps ``obj`` alive). Empty when no
        Python path reaches it.

    Example:
        >>> import torch, torchmem
        >>> logs = {"loss": [torch.zeros(3), torch.ones(3)]}
        >>> [h.path for h in torchmem.holders(logs["loss"][1])]
        ["logs['loss'][1]"]
    """
    import torch

    from torchmem.collect.graph import storage_key

    target_id = id(obj)
    key: int | None = None
    if isinstance(obj, torch.Tensor):
        key = storage_key(obj)
    elif isinstance(obj, torch.UntypedStorage):
        key = int(obj._cdata)
        target_id = -1
    del obj
    frame = sys._getframe(1)
    roots = _roots(frame)
    del frame
    targets = {key} if key is not None else set()
    try:
        found = search(roots, targets, {target_id} - {-1}, max_paths=max_paths,
                       max_objects=max_objects)
    finally:
        roots.clear()
    return found.get(key if key is not None else target_id, Search()).holders


@dataclass
class Search:
    """What :func:`search` found for one target: its holders, shortest first."""

    holders: list[Holder] = field(default_factory=list)


def search(roots: list[tuple[dict[str, Any], str, str | None, str]], keys: set[int],
           ids: set[int], *, max_paths: int = 10, max_objects: int = 200_000,
           walked: list[int] | None = None) -> dict[int, Search]:
    """One breadth-first walk from ``roots`` (see :func:`_roots`) for several targets.

    The hops into autograd graphs (``loss.grad_fn``) are taken after every other path,
    so a parameter is named ``model.fc.weight`` before ``loss.grad_fn``.

    Args:
        roots: the namespaces to start from.
        keys: storage keys (:func:`torchmem.collect.graph.storage_key`) to look for: a
            tensor on one of them is a hit (a view counts).
        ids: ``id()`` of other objects to look for (matched by identity); the ``id()``
            of a tensor target only tells it from its views.
        max_paths: stop looking for a target after this many holders of it.
        max_objects: stop after visiting this many objects.
        walked: when given, receives the number of objects visited.

    Returns:
        target (storage key or id) -> its :class:`Search` (only targets that were found).
    """
    import torch

    from torchmem.collect.graph import storage_key

    found: dict[int, Search] = {}
    wanted = len(keys) + len(ids)
    done: set[int] = set()
    seen: set[int] = set()
    keep: list[Any] = []
    queue: deque[tuple[Any, str, str, str, str | None, str]] = deque()
    later: deque[tuple[Any, str, str, str, str | None, str]] = deque()
    try:
        for namespace, kind, file, function in roots:
            for name, value in namespace.items():
                if not (name.startswith("__") and name.endswith("__")) and value is not None:
                    queue.append((value, name, kind, "", file, function))
        while (queue or later) and len(done) < wanted and len(seen) < max_objects:
            if not queue:  # the paths through autograd graphs come after all the others
                queue, later = later, queue
            value, path, kind, detail, file, function = queue.popleft()
            same = id(value) in ids
            target: int | None = id(value) if same else None
            if keys and isinstance(value, torch.Tensor):
                k = storage_key(value)
                if k in keys:  # a tensor target is known by its storage key
                    target = k
                    if ids and not same:  # the target tensor is known: this is a view
                        detail = detail or "a view of it (same storage)"
            if target is not None and target not in done:
                stmt = _statement(path, file, function)
                hits = found.setdefault(target, Search()).holders
                hits.append(Holder(path, kind, detail, stmt.file if stmt else None,
                                   stmt.line if stmt else None, stmt.code if stmt else None,
                                   function))
                if len(hits) >= max_paths:
                    done.add(target)
                if wanted == 1:
                    continue
            if id(value) in seen or isinstance(value, _ATOMIC) or isinstance(value, type):
                continue
            seen.add(id(value))
            keep.append(value)
            try:
                for child, cpath, ckind, cdetail in _children(value, path, kind == "graph"):
                    if child is not None and not isinstance(child, _ATOMIC):
                        (later if ckind == "graph" else queue).append(
                            (child, cpath, ckind, cdetail, file, function))
            except Exception:  # noqa: BLE001 - an object that refuses to be looked at
                continue
    finally:
        queue.clear()
        later.clear()
        keep.clear()
        if walked is not None:
            walked.append(len(seen))
    return found
