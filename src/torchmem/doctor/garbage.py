"""See which tensors only cyclic garbage holds, with one private ``gc.collect()``.

Python frees an object the moment its last reference goes, *unless* it sits in a
reference cycle (a closure capturing ``self`` stored on ``self``, an exception kept in
a local of the frame its traceback points to). Those wait for the cyclic collector,
and tensors they hold wait with them.

:func:`inspect_garbage` lists the tensors among the objects the collector tracks in
the inspected generations, takes a weak reference to each (and measures its storage and
what its autograd graph saved), notes the user objects that could form cycles (closures
with their ``file:line``, exceptions with their traceback frames, instances of user
classes) and which of those tensors each reaches, drops every strong reference, and
runs the collection. The tensors whose weak references died were held only by cyclic
garbage; the user objects that reached them are named as the cycle's anchors. Nothing
is kept alive and nothing is freed that the collector would not have freed.

Cost: by default only the young generations (0 and 1) are inspected and collected:
proportional to the objects created since the last collections, plus a walk of the young
tensors' autograd graphs that stops at nodes a backward pass freed (it ran every node
below them) and at nodes walked for another tensor (typically well under a millisecond). ``generation=2`` scans and collects everything (tens of milliseconds with
torch imported); the doctor does that only when memory grows and nothing else explains it.
"""

from __future__ import annotations

import ast
import gc
import linecache
import sys
import types
import weakref
from typing import Any, Callable

import torch

from torchmem.collect.cpu import heap_bytes
from torchmem.collect.graph import iter_nodes, read_saved, storage_key, storage_nbytes
from torchmem.doctor.culprit import read_locals
from torchmem.doctor.evidence import GarbageRecord

__all__ = ["inspect_garbage"]

#: (description, culprit name as written, file, line, code)
Anchor = tuple[str, str, str | None, int | None, str | None]
_BORING = frozenset({dict, list, tuple, set, frozenset, types.FrameType, types.CodeType,
                     types.CellType, types.MethodType, types.TracebackType, types.ModuleType,
                     weakref.ref, type})


def _closure_name(obj: types.FunctionType, code_line: str) -> str:
    head = code_line.split("lambda", 1)[0] if "lambda" in code_line else ""
    if "=" in head and "==" not in head:
        target = head.split("=", 1)[0].strip()
        if target.replace(".", "").replace("_", "").isalnum():
            return target
    return obj.__name__ if obj.__name__ != "<lambda>" else obj.__qualname__


def _next_objects(o: Any) -> list[Any]:
    """What a walk along references goes on to from ``o``: container items, attributes,
    a bound method's object, a tensor's autograd node, a node's inputs, and the attributes
    a custom ``autograd.Function`` put on its ``ctx`` (the node is the ctx)."""
    if isinstance(o, (list, tuple, set, frozenset)):
        return list(o)
    if isinstance(o, dict):
        return list(o.values())
    if isinstance(o, types.MethodType):
        return [o.__self__]
    if isinstance(o, torch.Tensor):
        fn = o.grad_fn
        return [fn] if fn is not None else []
    out: list[Any] = []
    if hasattr(o, "next_functions") and callable(getattr(o, "register_hook", None)):
        try:  # an autograd node: its inputs' nodes
            out.extend(f for f, _ in o.next_functions if f is not None)
        except (RuntimeError, TypeError, AttributeError):
            pass
    if hasattr(o, "__dict__") and not isinstance(o, (type, types.ModuleType)):
        try:
            out.extend(vars(o).values())
        except TypeError:
            pass
    return out


def _back_reference(obj: Any) -> str | None:
    """The attribute of ``obj`` through which it reaches itself again (the cycle's edge),
    also through tensors' autograd graphs (``self.out`` whose ``grad_fn`` keeps a bound
    method of ``self``; ``ctx.out`` whose ``grad_fn`` is the ctx)."""
    try:
        attrs = vars(obj)
    except TypeError:
        return None
    for name, value in attrs.items():
        stack: list[Any] = [value]
        seen: set[int] = set()
        while stack and len(seen) < 300:
            o = stack.pop()
            if o is obj:
                return name
            if id(o) in seen or isinstance(o, (str, bytes, int, float, type, types.ModuleType)):
                continue
            seen.add(id(o))
            stack.extend(_next_objects(o))
    return None


def _user_function_ctx(obj: Any, is_user: Callable[[str], bool]) -> str | None:
    """The file of the user's ``autograd.Function`` when ``obj`` is one of its ctx nodes."""
    forward_cls = getattr(type(obj), "_forward_cls", None)
    if forward_cls is None:
        return None
    module = sys.modules.get(getattr(forward_cls, "__module__", "") or "")
    file = getattr(module, "__file__", None)
    return file if isinstance(file, str) and is_user(file) else None


def _stored_at(file: str, def_line: int, name: str) -> tuple[int, str] | None:
    """Where a closure defined with ``def name`` at ``def_line`` is stored, in the function
    that defines it: the one statement that registers it as a hook, assigns it to an
    attribute or item, or adds it to a container (that statement closes the cycle)."""
    from torchmem.doctor.source import load_tree

    parsed = load_tree(file)
    if parsed is None:
        return None
    tree, lines = parsed
    outer = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)) and c.name == name
                and _first_line(c) <= def_line <= (c.end_lineno or c.lineno) for c in node.body):
            outer = node
    if outer is None:
        return None
    found: set[int] = set()
    for node in ast.walk(outer):
        passed = False
        if isinstance(node, ast.Call):
            passed = any(isinstance(a, ast.Name) and a.id == name
                         for a in [*node.args, *(k.value for k in node.keywords)])
        elif isinstance(node, ast.Assign):
            passed = isinstance(node.value, ast.Name) and node.value.id == name and any(
                isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets)
        if passed:
            found.add(getattr(node, "lineno", 0))
    if len(found) != 1:
        return None
    line = found.pop()
    return line, lines[line - 1].strip() if line <= len(lines) else ""


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The first line of a ``def`` with its decorators (a code object's
    ``co_firstlineno``: ``@lru_cache`` above ``def f``)."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _describe(obj: Any, is_user: Callable[[str], bool]) -> Anchor | None:
    from torchmem.doctor.source import find_statements
    from torchmem.doctor.statement_rank import best_statement

    kind = type(obj)
    if kind is types.FunctionType:
        code = obj.__code__
        if not is_user(code.co_filename) or not code.co_freevars:
            return None
        line = code.co_firstlineno
        text = linecache.getline(code.co_filename, line).strip()
        name = _closure_name(obj, text)
        if obj.__name__ != "<lambda>":  # a def'd closure: the line that stores it
            stored = _stored_at(code.co_filename, line, obj.__name__)
            if stored is not None:
                line, text = stored
        return (f"closure {obj.__qualname__} (captures {', '.join(code.co_freevars)})",
                name, code.co_filename, line, text)
    if issubclass(kind, BaseException):
        tb = obj.__traceback__
        frame = None
        while tb is not None:
            if is_user(tb.tb_frame.f_code.co_filename):
                frame = tb.tb_frame
                break
            tb = tb.tb_next
        if frame is None:
            return None
        file = frame.f_code.co_filename
        # the frame that keeps the exception in one of its own locals closes the cycle
        tb = obj.__traceback__
        while tb is not None:
            f = tb.tb_frame
            if is_user(f.f_code.co_filename) and f.f_code.co_name != "<module>":
                holder = next((k for k, v in read_locals(f).items() if v is obj), None)
                if holder is not None:
                    found = [s for s in find_statements(holder, [f.f_code.co_filename])
                             if s.function == f.f_code.co_name]
                    stmt = best_statement(found, "chain")
                    if stmt is not None:
                        return (f"exception {kind.__name__} kept in `{holder}` with its "
                                f"traceback (frames of {f.f_code.co_name}())", holder, stmt.file,
                                stmt.line, stmt.code)
            tb = tb.tb_next
        return (f"exception {kind.__name__} kept with its traceback "
                f"(frames of {frame.f_code.co_name}())", kind.__name__, file, frame.f_lineno,
                linecache.getline(file, frame.f_lineno).strip())
    ctx_file = _user_function_ctx(obj, is_user)
    if ctx_file is not None:
        # a custom Function's ctx that reaches itself: an attribute holding its own output
        # (or the object whose attribute holds it) closes the cycle
        attr = _back_reference(obj)
        if attr is None:
            return None
        stmt = best_statement(find_statements(f"ctx.{attr}", [ctx_file]), "container")
        name = stmt.target if stmt is not None and stmt.target else f"ctx.{attr}"
        fn = type(obj)._forward_cls.__qualname__
        return (f"the ctx of {fn} keeps `.{attr}`, which leads back to the ctx through "
                f"the autograd graph", name, ctx_file, stmt.line if stmt else None,
                stmt.code if stmt else None)
    module = sys.modules.get(getattr(kind, "__module__", "") or "")
    file = getattr(module, "__file__", None)
    if file and is_user(file):
        attr = _back_reference(obj)
        if attr is not None:
            stmt = best_statement(find_statements(f"self.{attr}", [file]), "container")
            return (f"{kind.__qualname__} object whose `.{attr}` leads back to it",
                    f"{kind.__qualname__}.{attr}", file, stmt.line if stmt else None,
                    stmt.code if stmt else None)
        return (f"{kind.__qualname__} object in a reference cycle", kind.__qualname__, file,
                None, None)
    return None


def _reach(obj: Any, index: dict[int, int], limit: int = 400) -> set[int]:
    """Indices (in ``index``) of the tracked tensors a shallow walk from ``obj`` reaches."""
    found: set[int] = set()
    stack = [obj]
    seen: set[int] = set()
    while stack and len(seen) < limit:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        i = index.get(id(o))
        if i is not None:
            found.add(i)
            continue
        if isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, types.FunctionType):
            stack.extend(c for c in (o.__closure__ or ()))
        elif isinstance(o, types.CellType):
            try:
                stack.append(o.cell_contents)
            except ValueError:
                pass
        elif isinstance(o, BaseException):
            if o.__traceback__ is not None:
                stack.append(o.__traceback__)
        elif isinstance(o, types.TracebackType):
            stack.append(o.tb_frame)
            if o.tb_next is not None:
                stack.append(o.tb_next)
        elif isinstance(o, types.FrameType):
            if o.f_code.co_name != "<module>":
                stack.extend(read_locals(o).values())
        elif isinstance(o, types.MethodType):
            stack.append(o.__self__)
        elif hasattr(o, "__dict__") and not isinstance(o, (type, types.ModuleType, torch.Tensor)):
            try:
                stack.extend(vars(o).values())
            except TypeError:
                pass
    return found



def _measure_young(tensors: list[Any]) -> tuple[list[weakref.ref[Any]],
                                                list[tuple[int | None, int, dict[int, int]]],
                                                dict[int, int]]:
    """Weak references to ``tensors``, and (storage key, bytes, saved key -> bytes) of each,
    measured before the collection that may free them; ``id -> position`` of each.

    A function of its own, so that nothing it walked (a loop's last tensor, node or saved
    tensor) is still referenced when the collection runs.
    """
    refs: list[weakref.ref[Any]] = []
    sizes: list[tuple[int | None, int, dict[int, int]]] = []
    index: dict[int, int] = {}
    walked: dict[int, Any] = {}  # id -> node, held so that ids stay unique during the walk
    # nodes not to walk past: walked from an earlier tensor (measured then), or freed by a
    # backward pass (which ran, and freed, every node below them)
    stop: set[int] = set()
    for t in tensors:
        try:
            ref = weakref.ref(t)
        except TypeError:
            continue
        index[id(t)] = len(refs)
        refs.append(ref)
        saved: dict[int, int] = {}
        fn = t.grad_fn
        if fn is not None and id(fn) not in walked and len(walked) < 50_000:
            for node in iter_nodes([fn], limit=5000, prune=lambda n: id(n) in stop):
                if id(node) in walked:
                    stop.add(id(node))  # shared graphs are measured once (first tensor wins)
                    continue
                walked[id(node)] = node
                found = read_saved(node)
                if found.freed and not found.live:
                    stop.add(id(node))
                for s in found.tensors:
                    k = storage_key(s)
                    if k is not None:
                        saved[k] = storage_nbytes(s)
        sizes.append((storage_key(t), storage_nbytes(t), saved))
    return refs, sizes, index


def inspect_garbage(step: int, steps_since: int, is_user: Callable[[str], bool], *,
                    generation: int = 1) -> GarbageRecord:
    """Collect ``generation`` (and younger) once and report the tensors only cycles held.

    Args:
        step: the current step (recorded).
        steps_since: steps since the previous inspection (to turn bytes into a rate).
        is_user: decides whether a filename is user code.
        generation: oldest generation inspected and collected (0, 1 or 2).

    Returns:
        A :class:`GarbageRecord` (plain data).
    """
    before_heap = heap_bytes() or 0
    objs: list[Any] = []
    for g in range(generation + 1):
        objs.extend(gc.get_objects(generation=g))
    kinds = list(map(type, objs))
    tensors = [o for o, cls in zip(objs, kinds) if issubclass(cls, torch.Tensor)]
    user_classes: dict[type, bool] = {}
    candidates = []
    for o, cls in zip(objs, kinds):
        if cls is types.FunctionType or issubclass(cls, BaseException):
            candidates.append(o)
        elif cls not in _BORING:
            known = user_classes.get(cls)
            if known is None:
                module = sys.modules.get(getattr(cls, "__module__", "") or "")
                file = getattr(module, "__file__", None)
                known = user_classes[cls] = (isinstance(file, str) and is_user(file)
                                             and not issubclass(cls, type)) or (
                    _user_function_ctx(o, is_user) is not None)  # a user Function's ctx
            if known:
                candidates.append(o)
    kinds.clear()
    objs.clear()
    anchors: list[tuple[Anchor, set[int]]] = []
    try:
        refs, sizes, index = _measure_young(tensors)
        for obj in candidates:
            reached = _reach(obj, index)  # first: describing walks further (graphs too)
            if reached:
                described = _describe(obj, is_user)
                if described is not None:
                    anchors.append((described, reached))
    finally:
        tensors.clear()
        candidates.clear()
        o = obj = None  # a loop's variable would hold its last object through the collection
    count = gc.collect(generation)
    dead = {i for i, r in enumerate(refs) if r() is None}
    alive_keys = {sizes[i][0] for i in range(len(refs)) if i not in dead}
    seen: set[int | None] = set()
    tensor_bytes = 0
    for i in dead:
        key, nbytes, saved = sizes[i]
        for k, n in [(key, nbytes), *saved.items()]:
            if k not in seen and k not in alive_keys:
                seen.add(k)
                tensor_bytes += n
    named: dict[str, Anchor] = {}
    for described, reached in anchors:
        if reached & dead and described[0] not in named:
            named[described[0]] = described
    order = sorted(named.values(), key=lambda a: (a[3] is None, not a[0].startswith(("closure", "exception"))))
    freed = before_heap - (heap_bytes() or 0)
    return GarbageRecord(step=step, steps_since=max(steps_since, 1), objects=count,
                         tensor_bytes=tensor_bytes if dead else 0, freed_heap=freed,
                         anchors=order[:6])
