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
The user's own classes are opened once the variables are walked (what a class keeps is
shared by its instances: a list in the class body, an ``lru_cache`` on a method or under
``@property``, whose cache keeps every instance it was called with): paths such as
``Posterior.mean.fget`` (see :mod:`torchmem.doctor.class_walk`).

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

import re
import sys
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from torchmem.doctor.holder_hops import ATOMIC as _ATOMIC
from torchmem.doctor.holder_hops import _children, _locals

__all__ = ["holders", "Holder", "search", "Search"]


@dataclass(frozen=True)
class Holder:
    """One path that keeps an object alive.

    Attributes:
        path: the expression as the user writes it (``self.history[3]``).
        kind: ``local``, ``global``, ``attribute``, ``item``, ``closure``, ``cache``,
            ``grad``, ``graph``, ``traceback`` or ``internal`` (referenced inside an object
            implemented in C: ``stream.<internal list>``): the last hop of the path.
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


def holder_statement(path: str, file: str | None, function: str) -> Any:
    """The statement that put what ``path`` reaches there: the one that stores into its
    last container or attribute (a hook's registration for a path through a hook dict),
    in ``file``; None when the source does not say."""
    if not file:
        return None
    from torchmem.doctor.source import find_statements
    from torchmem.doctor.statement_rank import _INITIAL, best_statement

    root = path.split(".__closure__")[0].split(".grad_fn")[0].removeprefix("the cache of ")
    hooks = re.match(r"(.*\._\w*hooks)\[[^\]]*\]$", root)
    try:
        if hooks:  # a hook's closure holds it: the line that registered the hook
            return best_statement(find_statements(hooks.group(1), [file], hook=True), "hook")
        found = find_statements(root, [file], local_to=function)
    except Exception:  # noqa: BLE001 - an unreadable or odd file: no line
        return None
    # `x = []` put nothing there; `x.add_(v)` changed what was already there
    found = [s for s in found if s.value not in _INITIAL and s.kind != "inplace"]
    if function != "<module>":  # a local: another function's variable of that name is not it
        name = re.split(r"[.\[]", root, maxsplit=1)[0]
        found = [s for s in found if s.function == function
                 or re.split(r"[.\[]", s.target or "", maxsplit=1)[0] != name]
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
    is_user = _default_is_user()
    roots = _roots(frame, is_user)
    del frame
    targets = {key} if key is not None else set()
    try:
        found = search(roots, targets, {target_id} - {-1}, max_paths=max_paths,
                       max_objects=max_objects, is_user=is_user)
    finally:
        roots.clear()
    return found.get(key if key is not None else target_id, Search()).holders


@dataclass
class Search:
    """What :func:`search` found for one target: its holders, shortest first."""

    holders: list[Holder] = field(default_factory=list)


def search(roots: list[tuple[dict[str, Any], str, str | None, str]], keys: set[int],
           ids: set[int], *, max_paths: int = 10, max_objects: int = 200_000,
           walked: list[int] | None = None,
           is_user: Callable[[str], bool] | None = None) -> dict[int, Search]:
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
        is_user: which files are the user's: the classes they define, bound in a root or
            the type of an object walked, are opened after everything else but graphs
            and C objects' insides (None: no class is opened).

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
    classes = _Classes(is_user)
    try:
        for namespace, kind, file, function in roots:
            for name, value in namespace.items():
                if not (name.startswith("__") and name.endswith("__")) and value is not None:
                    queue.append((value, name, kind, "", file, function))
        while (queue or later or classes.pending) and len(done) < wanted \
                and len(seen) < max_objects:
            if not queue:  # the user's classes, then paths through autograd graphs and
                # C objects' insides come last
                if classes.pending:
                    queue.extend(classes.take())
                    continue
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
                stmt = holder_statement(path, file, function)
                hits = found.setdefault(target, Search()).holders
                hits.append(Holder(path, kind, detail, stmt.file if stmt else None,
                                   stmt.line if stmt else None, stmt.code if stmt else None,
                                   function))
                if len(hits) >= max_paths:
                    done.add(target)
                if wanted == 1:
                    continue
            if isinstance(value, type):
                classes.note(value, path)
                continue
            if id(value) in seen or isinstance(value, _ATOMIC):
                continue
            seen.add(id(value))
            keep.append(value)
            classes.note(type(value))
            try:
                for child, cpath, ckind, cdetail in _children(value, path, kind == "graph"):
                    if child is not None and not isinstance(child, _ATOMIC):
                        (later if ckind in ("graph", "internal") else queue).append(
                            (child, cpath, ckind, cdetail, file, function))
            except Exception:  # noqa: BLE001 - an object that refuses to be looked at
                continue
    finally:
        queue.clear()
        later.clear()
        keep.clear()
        classes.clear()
        if walked is not None:
            walked.append(len(seen))
    return found


class _Classes:
    """The user classes :func:`search` has met, with their attributes to walk (see
    :mod:`torchmem.doctor.class_walk`): each class once, named as first met."""

    def __init__(self, is_user: Callable[[str], bool] | None) -> None:
        self.is_user = is_user
        self.met: dict[int, type] = {}  # kept alive (so ids stay theirs) during the walk
        self.pending: list[tuple[Any, str, str, str, str | None, str]] = []

    def note(self, cls: type, name: str | None = None) -> None:
        from torchmem.doctor.class_walk import class_file, class_items, class_name

        if self.is_user is None or id(cls) in self.met:
            return
        self.met[id(cls)] = cls
        file = class_file(cls)
        if file is None or not self.is_user(file):
            return
        name = name or class_name(cls)
        for attr, value in class_items(cls):
            self.pending.append((value, f"{name}.{attr}", "attribute", "", file, "<module>"))

    def take(self) -> list[tuple[Any, str, str, str, str | None, str]]:
        out, self.pending = self.pending, []
        return out

    def clear(self) -> None:
        self.met.clear()
        self.pending.clear()
