"""See which tensors only cyclic garbage holds, with one private ``gc.collect()``.

Python frees an object the moment its last reference goes, *unless* it sits in a
reference cycle (a closure capturing ``self`` stored on ``self``, an exception kept in
a local of the frame its traceback points to). Those wait for the cyclic collector,
and tensors they hold wait with them. :func:`inspect_garbage` runs one collection with
``gc.DEBUG_SAVEALL`` so that the unreachable objects are kept in ``gc.garbage`` instead
of being freed, measures the tensors among them (and what their autograd graphs
saved), names the user objects that form the cycles (closures with their
``file:line``, frames, exceptions, instances of user classes), then empties
``gc.garbage`` and collects again so that everything is freed as it would have been.

Cost: two full collections (proportional to all gc-tracked objects: ~20-60 ms with
torch imported) plus a pass over the garbage. Run only at analysis boundaries.
"""

from __future__ import annotations

import gc
import linecache
import types
from typing import Any, Callable

import torch

from torchmem.collect.cpu import heap_bytes
from torchmem.collect.graph import iter_nodes, saved_tensors, storage_key, storage_nbytes
from torchmem.doctor.causes import GarbageRecord

__all__ = ["inspect_garbage"]


def _anchor(obj: Any, is_user: Callable[[str], bool]) -> tuple[str, str | None, int | None, str | None] | None:
    if isinstance(obj, types.FunctionType) and is_user(obj.__code__.co_filename):
        code = obj.__code__
        line = code.co_firstlineno
        return (f"closure {obj.__qualname__} (captures {', '.join(code.co_freevars) or 'nothing'})",
                code.co_filename, line, linecache.getline(code.co_filename, line).strip())
    if isinstance(obj, BaseException):
        tb = obj.__traceback__
        frame = None
        while tb is not None:
            if is_user(tb.tb_frame.f_code.co_filename):
                frame = tb.tb_frame
                break
            tb = tb.tb_next
        if frame is not None:
            file = frame.f_code.co_filename
            return (f"exception {type(obj).__name__} kept with its traceback "
                    f"(frames of {frame.f_code.co_name}())", file, frame.f_lineno,
                    linecache.getline(file, frame.f_lineno).strip())
        return (f"exception {type(obj).__name__} kept with its traceback", None, None, None)
    cls = type(obj)
    mod = getattr(cls, "__module__", "") or ""
    if hasattr(obj, "__dict__") and not isinstance(obj, (type, types.ModuleType, types.FrameType)):
        module = __import__("sys").modules.get(mod)
        file = getattr(module, "__file__", None)
        if file and is_user(file):
            return (f"{cls.__qualname__} object in a cycle", file, None, None)
    return None


def inspect_garbage(step: int, steps_since: int, is_user: Callable[[str], bool]) -> GarbageRecord:
    """Collect once, keep and measure the garbage, then free it.

    Args:
        step: the current step (recorded).
        steps_since: steps since the previous inspection (to turn bytes into a rate).
        is_user: decides whether a filename is user code.

    Returns:
        A :class:`GarbageRecord` (plain data).
    """
    before_heap = heap_bytes() or 0
    flags = gc.get_debug()
    start = len(gc.garbage)
    gc.set_debug(flags | gc.DEBUG_SAVEALL)
    try:
        gc.collect()
    finally:
        gc.set_debug(flags)
    garbage = gc.garbage[start:]
    del gc.garbage[start:]
    seen: set[int] = set()
    tensor_bytes = 0
    anchors: list[tuple[str, str | None, int | None, str | None]] = []
    user_objects: list[Any] = []
    roots = []
    try:
        for obj in garbage:
            if isinstance(obj, torch.Tensor):
                key = storage_key(obj)
                if key is not None and key not in seen:
                    seen.add(key)
                    tensor_bytes += storage_nbytes(obj)
                if obj.grad_fn is not None:
                    roots.append(obj.grad_fn)
            else:
                user_objects.append(obj)
        for node in iter_nodes(roots, limit=100_000):
            for t in saved_tensors(node):
                key = storage_key(t)
                if key is not None and key not in seen:
                    seen.add(key)
                    tensor_bytes += storage_nbytes(t)
        if tensor_bytes:
            kinds: dict[str, tuple[str, str | None, int | None, str | None]] = {}
            for obj in user_objects:
                a = _anchor(obj, is_user)
                if a is not None and a[0] not in kinds:
                    kinds[a[0]] = a
            # closures and exceptions explain a cycle better than the instances they hold
            anchors = sorted(kinds.values(), key=lambda a: (a[2] is None, not a[0].startswith(("closure", "exception"))))
        count = len(garbage)
    finally:
        roots.clear()
        user_objects.clear()
        garbage.clear()
        del garbage
    gc.collect()
    freed = before_heap - (heap_bytes() or 0)
    return GarbageRecord(step=step, steps_since=max(steps_since, 1), objects=count,
                         tensor_bytes=tensor_bytes, freed_heap=freed, anchors=anchors[:6])
