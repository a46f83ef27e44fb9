"""One hop of the holder walk: the objects an object keeps alive, each with the path a user
writes to reach it (``[3]``, ``['loss']``, ``.weight``, ``.grad``, ``.grad_fn``, the cache of
an ``lru_cache``, a closure cell, a traceback's frames, a suspended generator's locals, a
numpy array's ``.base``), and
what an object implemented in C references internally (``.<internal list>``: see
:mod:`torchmem.doctor.internals`).

Split from :mod:`torchmem.doctor.holders_api`, whose walk follows these hops.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import sys
import types
from collections import deque
from typing import Any, Iterator

from torchmem.doctor.internals import NOT_ARRAY, array_base, internal_refs, native

__all__ = ["ATOMIC"]

#: values the walk never opens
ATOMIC = (str, bytes, bytearray, int, float, complex, bool, type(None), range, slice,
          types.BuiltinFunctionType, types.CodeType, memoryview)
_PTR = ctypes.POINTER(ctypes.c_void_p)


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
            # the key keeps the call's arguments (a method's `self` among them)
            for arg in (key if type(key) is tuple else (key,)):
                if not isinstance(arg, ATOMIC):
                    yield arg, f"the cache of {path}", "cache", \
                        f"an argument of a cached call ({type(arg).__name__})"
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
        for index, value in enumerate(obj.__defaults__ or ()):
            yield value, f"{path}.__defaults__[{index}]", "item", "default argument"
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
    base = array_base(obj)
    if base is not NOT_ARRAY:
        if base is not None:
            yield base, f"{path}.base", "attribute", "the memory the numpy array shares"
        return
    attrs: dict[str, Any] = {}
    covered: set[int] = set()
    try:
        own = vars(obj)
        covered.add(id(own))
        attrs = dict(own)
    except TypeError:
        pass
    for name in getattr(type(obj), "__slots__", ()) if not isinstance(obj, type) else ():
        if isinstance(name, str) and hasattr(obj, name):
            attrs[name] = getattr(obj, name, None)
    for name, value in attrs.items():
        covered.add(id(value))
        if isinstance(name, str) and not (name.startswith("__") and name.endswith("__")):
            if not (isinstance(obj, torch.nn.Module)
                    and name in ("_parameters", "_buffers", "_modules")):
                yield value, f"{path}.{name}", "attribute", ""
    if not isinstance(obj, type) and native(type(obj)):
        for value, step in internal_refs(obj, covered):
            yield value, path + step, "internal", \
                f"referenced internally by a {type(obj).__name__} object"


def _shape_of(key: Any) -> str:
    """`` (1000, 512)`` for a tensor key (an optimizer's state is keyed by parameters)."""
    import torch

    if isinstance(key, torch.Tensor):
        return " (" + ", ".join(str(d) for d in key.shape) + ")"
    return ""


def _locals(frame: types.FrameType) -> dict[str, Any]:
    from torchmem.doctor.roots import read_locals

    return read_locals(frame) if frame.f_code.co_name != "<module>" else dict(frame.f_globals)

