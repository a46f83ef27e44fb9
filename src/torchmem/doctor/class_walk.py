"""Classes of the script as roots of the doctor's walks: class attributes and caches.

What a class keeps is shared by all its instances and outlives every one of them: a list
in the class body that a method appends to (``Block.saved.append(out)``), or an
``lru_cache`` around a method, whose cache is keyed on ``self`` and so keeps every
instance it was called with and each result. Neither is an attribute of an instance
(``vars(self)`` does not show it), and a class is not walked as a value, so both walks
(the snapshot's, :mod:`torchmem.doctor.walker`, and the holder walk of the censuses,
:mod:`torchmem.doctor.holders`) take the script's own classes as roots of their own:
those bound to a name in a user frame or a user module (named as there:
``Bottleneck``, ``mymodule.Bottleneck``) and the classes of the user objects the walk
meets (named by their ``__qualname__``). They are walked after the variables (what a
variable also reaches stays the variable's) and before what C objects reference
internally.

Of a class's own ``__dict__`` the walk takes every value that can hold something: not
dunder or ``_sunder_`` names, not numbers or strings, and a function
(``staticmethod``/``classmethod`` unwrapped) only when it has closure cells (a decorator
that wraps a method keeps its cache in a cell: ``func_with_cache``); a plain method
keeps nothing. A property is opened only for the accessors that can keep something: an
``lru_cache`` under ``@property`` (whose cache, keyed on ``self``, keeps every instance
whose property was read) or an accessor with closure cells. Paths are written as the
user writes them: ``Bottleneck.out_saved``, ``Positions.forward`` for an ``lru_cache``
wrapper in the class body, ``Posterior.mean.fget`` for one under ``@property``,
``Embedding.forward:func_with_cache`` for a cache a decorator closes over.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable, Iterable

from torchmem.doctor.roots import _ATOMIC

__all__ = ["class_file", "class_name", "class_items", "classes_in"]


def class_file(cls: type) -> str | None:
    """The file of the module that defines ``cls`` (None when it has none)."""
    mod = sys.modules.get(getattr(cls, "__module__", "") or "")
    file = getattr(mod, "__file__", None)
    return file if isinstance(file, str) else None


def class_name(cls: type) -> str:
    """How the script names ``cls``: its ``__qualname__`` (``Outer.Inner``), or its
    ``__name__`` for a class defined inside a function."""
    qual = getattr(cls, "__qualname__", None) or cls.__name__
    return cls.__name__ if "<locals>" in qual else qual


def _dunder(name: str) -> bool:
    return (name.startswith("__") and name.endswith("__")) or \
        (len(name) > 2 and name.startswith("_") and name.endswith("_"))


def class_items(cls: type) -> list[tuple[str, Any]]:
    """The values of ``cls``'s own ``__dict__`` that can hold memory (see the module
    docstring), as (attribute name, value)."""
    try:
        own = list(vars(cls).items())
    except TypeError:
        return []
    out = []
    for name, value in own:
        if not isinstance(name, str) or _dunder(name):
            continue
        if isinstance(value, property):
            out.extend((f"{name}.{part}", accessor) for part in ("fget", "fset", "fdel")
                       if _keeps(accessor := getattr(value, part, None)))
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, types.FunctionType):
            if not value.__closure__:
                continue
        elif isinstance(value, _ATOMIC):
            continue
        out.append((name, value))
    return out


def _keeps(accessor: Any) -> bool:
    """Whether a property's accessor can keep values: an ``lru_cache`` wrapper, or a
    function with closure cells."""
    if isinstance(accessor, types.FunctionType):
        return bool(accessor.__closure__)
    return type(accessor).__name__ == "_lru_cache_wrapper"


def classes_in(namespace: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, type]]:
    """(name, class) for each class bound in ``namespace`` (a frame's locals or a module's
    globals), named ``prefix + name``."""
    for name, value in list(namespace.items()):
        if isinstance(value, type) and not _dunder(name):
            yield prefix + name, value


class ClassRoots:
    """The user classes a walk has met, to walk once the variables are walked.

    ``note`` keeps the first name a class is met under; only classes defined in user
    code (``is_user`` of their module's file) are kept.
    """

    def __init__(self, is_user: Callable[[str], bool]) -> None:
        self.is_user = is_user
        self.met: dict[int, bool] = {}
        self.keep: list[type] = []  # the classes met: their ids stay theirs during the walk
        self.pending: list[tuple[str, type, str]] = []

    def note(self, cls: type, name: str | None = None) -> None:
        key = id(cls)
        if key in self.met:
            return
        file = class_file(cls)
        user = file is not None and self.is_user(file)
        self.met[key] = user
        self.keep.append(cls)
        if user and class_items(cls):
            self.pending.append((name or class_name(cls), cls, file))  # type: ignore[arg-type]

    def note_all(self, namespace: dict[str, Any], prefix: str = "") -> None:
        """Note the classes bound in ``namespace`` (see :func:`classes_in`)."""
        for name, cls in classes_in(namespace, prefix):
            self.note(cls, name)

    def take(self) -> list[tuple[str, type, str]]:
        out, self.pending = self.pending, []
        return out

    def clear(self) -> None:
        self.met.clear()
        self.keep.clear()
        self.pending.clear()


def walk_classes(walker: Any) -> None:
    """Walk the classes ``walker`` (a :class:`torchmem.doctor.walker._Walker`) has noted,
    each as a root named as noted, its attributes one hop below it."""
    for name, cls, file in walker.classes.take():
        if name in walker.snap.paths:  # a variable of that name was walked already
            continue
        stats = walker._stats(name, "global", cls, 0, name, function="<module>", file=file)
        for attr, value in class_items(cls):
            s, t = walker._child(value, f"{name}.{attr}", "attribute", stats, [stats], 1, name)
            if s is not stats:
                s.owner_class, s.owner_file = cls.__name__, file
            walker._walk(value, s, t, 1, name)
            if walker.snap.truncated:
                return
