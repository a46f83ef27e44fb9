"""Who keeps a given storage alive: the path from the script's variables that reaches it.

The doctor's walk (:mod:`torchmem.doctor.culprit`) measures what each named path of the
user's variables holds. :func:`holder_paths` runs the same walk, from the same roots
(the user frames' locals, the script's globals, user modules), asked for a few storages:
for each, the first named path that reaches it (``epoch_logits``, ``self.history``,
``cache['x']``), or ``the autograd graph of <path>`` when it is a tensor saved for
backward by a graph that path holds. Parameters, gradients and optimizer state are not
walked (the census names them: ``fc.weight``, ``grad of fc.weight``, ``exp_avg of ...``).

Cost: one doctor walk (about 1-3 us per object reached, 3-6 us per graph node), bounded
by ``max_objects``/``max_nodes``; plain strings out, nothing of the script kept.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable, Iterable

import torch

from torchmem.doctor.roots import (
    _ATOMIC,
    _frame_locals,
    _root_items,
    _user_modules,
    referenced_modules,
    frame_chain,
    owned_storages,
    owning_objects,
)
from torchmem.doctor.walker import _fast_key, _Walker

__all__ = ["holder_paths"]


class _Watch(set):  # type: ignore[type-arg]
    """The walker's set of storages seen: notes the path that first reaches a target."""

    def __init__(self, walker: "_HolderWalker") -> None:
        super().__init__()
        self.walker = walker

    def add(self, key: Any) -> None:
        w = self.walker
        if key in w.targets and key not in w.found and w.current is not None:
            w.found[key] = f"the autograd graph of {w.current}"
        set.add(self, key)


class _HolderWalker(_Walker):
    def __init__(self, targets: set[int], is_user: Callable[[str], bool], max_objects: int,
                 max_nodes: int) -> None:
        super().__init__(0, is_user, max_objects, max_nodes)
        self.targets = targets
        self.found: dict[int, str] = {}
        self.current: str | None = None
        self.storages = _Watch(self)

    def _optimizer_state(self, opt: torch.optim.Optimizer, tracked: list[Any]) -> None:
        """Not walked: the census names optimizer state by its role (``exp_avg of ...``)."""

    def _tensor(self, t: torch.Tensor, tracked: list[Any], param: bool = False) -> None:
        path = tracked[-1].path if tracked else None
        key = _fast_key(t)
        if key is not None and key in self.targets and key not in self.found and path:
            self.found[key] = path
        self.current = path
        super()._tensor(t, tracked, param)


def holder_paths(keys: Iterable[int], frame: types.FrameType | None,
                 main_globals: dict[str, Any] | None, is_user: Callable[[str], bool], *,
                 max_objects: int = 100_000, max_nodes: int = 100_000) -> dict[int, str]:
    """Storage key -> the first named path that reaches it (only keys that were found).

    Args:
        keys: storage keys (:func:`torchmem.collect.graph.storage_key`) to look for.
        frame: the innermost user frame (its callers are walked too).
        main_globals: the script's ``__main__`` namespace.
        is_user: decides whether a file name is user code.
        max_objects, max_nodes: the walk's budget.
    """
    targets = set(keys)
    if not targets:
        return {}
    w = _HolderWalker(targets, is_user, max_objects, max_nodes)
    namespaces: list[tuple[list[tuple[str, Any]], str, str, str]] = []
    frames = frame_chain(frame, is_user)
    try:
        for f in frames:
            space = _frame_locals(f)
            items = _root_items(space)
            w.classes.note_all(space)
            namespaces.append((items, "global" if f.f_code.co_name == "<module>" else "local",
                               f.f_code.co_name, f.f_code.co_filename))
        if main_globals is not None:
            namespaces.append((_root_items(main_globals), "global", "<module>",
                               str(main_globals.get("__file__") or "")))
            w.classes.note_all(main_globals)
        for name in _user_modules(is_user, referenced_modules(main_globals)):
            mod = sys.modules.get(name)
            if mod is not None and mod.__dict__ is not main_globals:
                w.classes.note_all(vars(mod), f"{name}.")
                namespaces.append(([(f"{name}.{k}", v) for k, v in _root_items(vars(mod))],
                                   "global", "<module>", str(getattr(mod, "__file__", ""))))
        tops = owning_objects(v for items, *_ in namespaces for _, v in items)
        w.owned = owned_storages(tops)
        tops.clear()
        for items, kind, function, file in namespaces:
            for name, value in items:
                if len(w.found) == len(targets):
                    break
                if not isinstance(value, _ATOMIC):
                    w.walk_root(name, value, kind, function, file)
        if len(w.found) < len(targets):
            w.finish()  # what C objects reached from the roots reference internally
    finally:
        w.keep.clear()
        w.node_keep.clear()
        w.internal.clear()
        w.hook_dicts.clear()
        w.classes.clear()
        namespaces.clear()
        frames.clear()
    return dict(w.found)
