"""One hop of the doctor's object walk: an object's attributes, a module's children,
buffers with a graph and hook dicts (split from :mod:`torchmem.doctor.walker`).

For an object at a named path (not deeper than the named depth), the attributes that
hold a tensor with a ``grad_fn`` are recorded (:attr:`PathStats.graph_attrs`), and the
lengths of those that hold a list, dict or deque (:attr:`PathStats.item_attrs`): when
such an object holds a chain of graphs, the attribute a method rebinds from its own
value names it better than the object (:mod:`torchmem.doctor.chained_attrs`); when a
hook left registered keeps appending, the list it appends to
(:mod:`torchmem.doctor.stale_hooks`).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable

import torch

from torchmem.doctor.hook_sites import hook_methods, hook_names
from torchmem.doctor.pathstats import PathStats
from torchmem.doctor.roots import _ATOMIC

_MODULE_SPECIAL = frozenset({
    "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "training",
    "_is_full_backward_hook", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
    "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks", "_compiled_call_impl",
})
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
               "_backward_pre_hooks")
#: hops named below a module's hook dict, past the walker's ``_TRACK_DEPTH`` (the hook, its closure
#: variable, an attribute of that object)
_BELOW_HOOK = 3


def below_hook(tracked: list[PathStats], depth: int) -> bool:
    """Whether a path ``depth`` deep is named because it lies at most
    :data:`_BELOW_HOOK` hops under a module's hook dict (what a hook closes over: the object
    whose list a hook appends to, ``model.fc._forward_hooks[3]:self.acts``), wherever the
    hook dict itself sits."""
    hook = next((s for s in reversed(tracked) if s.kind == "hook"), None)
    return hook is not None and depth - hook.depth <= _BELOW_HOOK


class ObjectHops:
    """The hops into objects and modules of :class:`torchmem.doctor.walker._Walker`."""

    if TYPE_CHECKING:  # provided by the walker
        from torchmem.doctor.class_walk import ClassRoots

        classes: ClassRoots
        hook_dicts: list[tuple[Any, PathStats, list[PathStats], int, str]]

        def _child(self, obj: Any, path: str, kind: str, parent: PathStats,
                   tracked: list[PathStats], depth: int, root: str, owner: Any = None,
                   named: bool = True) -> tuple[PathStats, list[PathStats]]: ...

        def _add(self, tracked: list[PathStats], attr: str, value: int) -> None: ...

    def _attributes(self, obj: Any, parent: PathStats, tracked: list[PathStats], depth: int,
                    root: str, push: Callable[[Any], None]) -> set[int]:
        """Push ``obj``'s ``__dict__``/``__slots__`` values; return the ids they cover (the
        values and the ``__dict__`` itself). Its class is noted, to walk as a root."""
        self.classes.note(type(obj))
        covered: set[int] = set()
        try:
            own = vars(obj)
            covered.add(id(own))
            attrs = dict(own)
        except TypeError:
            attrs = {}
        for name in getattr(type(obj), "__slots__", ()) if not attrs else ():
            if isinstance(name, str) and hasattr(obj, name):
                attrs[name] = getattr(obj, name, None)
        # ``obj`` is the object of a named path (not one of a named container's items)
        at_path = parent.depth == depth and parent.items is None
        for name, value in attrs.items():
            covered.add(id(value))
            if isinstance(value, _ATOMIC) or not isinstance(name, str):
                continue
            if at_path and isinstance(value, torch.Tensor) and value.grad_fn is not None:
                parent.graph_attrs += (name,)
            elif at_path and isinstance(value, (list, dict, deque)):
                parent.item_attrs += ((name, len(value)),)
            s, t = self._child(value, f"{parent.path}.{name}", "attribute", parent, tracked,
                               depth + 1, root, owner=obj)
            push((value, s, t, depth + 1))
        return covered

    def _module(self, mod: torch.nn.Module, parent: PathStats, tracked: list[PathStats],
                depth: int, root: str, push: Callable[[Any], None]) -> None:
        base = parent.path
        self.classes.note(type(mod))
        for name, child in mod._modules.items():
            if child is not None:
                shown = f"{base}[{name}]" if name.isdigit() else f"{base}.{name}"
                s, t = self._child(child, shown, "attribute", parent, tracked,
                                   depth + 1, root, owner=mod)
                push((child, s, t, depth + 1))
        for param in mod._parameters.values():
            if param is not None:  # counted only when no top-level name owns the module
                self._tensor(param, tracked, param=True)  # type: ignore[attr-defined]
                if param.grad is not None:
                    self._tensor(param.grad, tracked)  # type: ignore[attr-defined]
        at_path = parent.depth == depth and parent.items is None
        for name, buf in mod._buffers.items():
            if buf is not None and buf.grad_fn is not None:
                if at_path:  # a buffer rebound with a graph: as an attribute that holds one
                    parent.graph_attrs += (name,)
                s, t = self._child(buf, f"{base}.{name}", "attribute", parent, tracked,
                                   depth + 1, root, owner=mod)
                push((buf, s, t, depth + 1))
        for hook_attr in _HOOK_DICTS:
            hooks = getattr(mod, hook_attr, None)
            if hooks:
                s, t = self._child(hooks, f"{base}.{hook_attr}", "hook", parent, tracked,
                                   depth + 1, root, owner=mod)
                if s is not parent:
                    s.hook_names, s.hook_methods = hook_names(hooks), hook_methods(mod, hook_attr)
                self._add(t, "hooks", len(hooks))
                # what the hooks reach is walked after every named root: what a variable
                # also reaches (an extractor's list its hook appends to) is the variable's
                self.hook_dicts.append((hooks, s, t, depth + 1, root))
        for name, value in vars(mod).items():
            if name in _MODULE_SPECIAL or name in _HOOK_DICTS or isinstance(value, _ATOMIC):
                continue
            s, t = self._child(value, f"{base}.{name}", "attribute", parent, tracked,
                               depth + 1, root, owner=mod)
            push((value, s, t, depth + 1))
