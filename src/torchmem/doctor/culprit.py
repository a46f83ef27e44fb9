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

import sys
import types
from typing import Any, Callable

import torch

from torchmem.doctor.pathstats import PathStats, Snapshot
from torchmem.doctor.roots import (
    _frame_locals,
    _root_items,
    _user_modules,
    referenced_modules,
    frame_chain,
    owned_storages,
    owning_objects,
    read_locals,
)
from torchmem.doctor.unreached import LeafNames, measure_unreached, named_modules
from torchmem.doctor.walker import _Walker, _fast_key

__all__ = ["PathStats", "Snapshot", "take_snapshot", "owned_storages", "frame_chain",
           "read_locals"]


def take_snapshot(step: int, frame: types.FrameType | None, main_globals: dict[str, Any] | None,
                  is_user: Callable[[str], bool], *, max_objects: int = 300_000,
                  max_nodes: int = 200_000,
                  outermost: Callable[[types.FrameType], bool] | None = None,
                  samples: dict[str, list[Any]] | None = None,
                  leaf_names: LeafNames | None = None, unreached: bool = True,
                  previous: dict[str, list[Any]] | None = None) -> Snapshot:
    """Measure every named path reachable from the user's variables at this boundary.

    Args:
        step: the step number the snapshot belongs to.
        frame: the innermost user frame (its ``f_back`` chain is walked too).
        main_globals: the script's ``__main__`` namespace.
        is_user: decides whether a filename is user code.
        max_objects: stop after this many objects.
        max_nodes: stop after this many autograd nodes.
        outermost: the last frame of the chain to walk (see :func:`frame_chain`).
        samples: when given, filled with weak references to a few tensors per path
            (path -> refs), to tell at the next snapshot what each path kept
            (:attr:`PathStats.survived`).
        leaf_names: when given (and ``unreached`` is true), the live tensors no path
            reaches are measured too (:attr:`Snapshot.unreached`); leaves recorded there
            are named.
        unreached: measure them at this snapshot (a listing of every gc object).
        previous: the ``samples`` of the previous snapshot: the paths that still exist
            get :attr:`PathStats.orphaned`, their samples alive that no path reaches now.

    Returns:
        A :class:`Snapshot` (plain data only).

    Example:
        >>> import sys
        >>> snap = take_snapshot(1, sys._getframe(), None, lambda f: True)  # doctest: +SKIP
    """
    import time

    t0 = time.perf_counter()
    w = _Walker(step, is_user, max_objects, max_nodes)
    w.samples = samples
    frames = frame_chain(frame, is_user, outermost)
    if frames:
        w.snap.site = (frames[0].f_code.co_filename, frames[0].f_lineno)
    namespaces: list[tuple[list[tuple[str, Any]], str, str, str]] = []
    for f in frames:
        is_module = f.f_code.co_name == "<module>"
        space = _frame_locals(f)
        items = _root_items(space)
        w.classes.note_all(space)
        namespaces.append((items, "global" if is_module else "local", f.f_code.co_name,
                           f.f_code.co_filename))
    if main_globals is not None:
        namespaces.append((_root_items(main_globals), "global", "<module>",
                           str(main_globals.get("__file__") or "")))
        w.classes.note_all(main_globals)
    for modname in _user_modules(is_user, referenced_modules(main_globals)):
        mod = sys.modules.get(modname)
        file = getattr(mod, "__file__", None)
        if mod is not None and file and mod.__dict__ is not main_globals:
            items = [(f"{modname}.{k}", v) for k, v in _root_items(vars(mod))]
            w.classes.note_all(vars(mod), f"{modname}.")
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
    # owned memory first: modules and optimizers of the namespaces (top level, one
    # attribute deep, a function's closure)
    tops = [v for items, *_ in namespaces for _, v in items]
    w.owned = owned_storages(owning_objects(tops))
    w.snap.owned_bytes = sum(w.owned.values())
    modules = named_modules(namespaces)
    try:
        for items, kind, function, file in namespaces:
            for name, value in items:
                w.walk_root(name, value, kind, function, file)
        for name, hooks in hook_roots:
            w.walk_root(name, hooks, "hook", "<module>", None)
            if name in w.snap.paths:
                w.snap.paths[name].hooks += len(hooks)
        w.finish()  # what C objects reached from the roots reference internally
        for name, module, function, file in modules:
            for pname, p in module.named_parameters():
                g = p.grad
                if g is not None and g.grad_fn is not None:
                    w.walk_grad(f"{name}.{pname}.grad", g, function, file)
                del g
        if previous:
            _orphans(w, previous)
        if leaf_names is not None and samples:
            leaf_names.record_paths(samples, {p for p, st in w.snap.paths.items()
                                              if st.items is None and st.type.endswith("Tensor")})
        if leaf_names is not None and unreached:
            w.snap.unreached = measure_unreached(w.storages, w.owned, leaf_names,
                                                 [(n, m) for n, m, _, _ in modules], w.seen)
    finally:
        w.keep.clear()
        w.node_keep.clear()
        w.internal.clear()
        w.hook_dicts.clear()
        w.classes.clear()
        namespaces.clear()
        tops.clear()
        frames.clear()
        modules.clear()
    w.snap.elapsed_s = time.perf_counter() - t0
    return w.snap


def _orphans(w: _Walker, previous: dict[str, list[Any]]) -> None:
    """Count, per path that still exists, its samples from the previous snapshot that are
    alive and that no path and no owned memory reaches now (weak references only)."""
    for path, refs in previous.items():
        stats = w.snap.paths.get(path)
        if stats is None:
            continue
        for ref in refs:
            t = ref()
            key = _fast_key(t) if t is not None else None
            if key is not None and key not in w.storages and key not in w.owned:
                stats.orphaned += 1
            del t

