"""What an object implemented in C references beyond its attributes: the walks' last hop.

An ``itertools.cycle`` keeps every item it has yielded in a list of its own; a ``map``
object its function and iterator; an ``lru_cache`` wrapper its cache; an extension type
whatever its C struct points to. Python shows none of that as attributes, but the cyclic
garbage collector can list it: :func:`gc.get_referents` (only for objects the collector
tracks; others report nothing). The doctor's walks (:mod:`torchmem.doctor.walker`,
:mod:`torchmem.doctor.holder_hops`) follow those references for objects of a class
implemented in C (:func:`native`) that no other rule of theirs opens, and name each with
the path step ``.<internal TYPE>`` (:func:`internal_refs`).

No reference is kept beyond the call: the class cache holds weak references only.
"""

from __future__ import annotations

import ast
import gc
import types
import weakref
from typing import TYPE_CHECKING, AbstractSet, Any, Iterator

if TYPE_CHECKING:
    from torchmem.doctor.source import Statement

__all__ = ["native", "internal_refs", "internal_owner", "binding_statement", "describe",
           "array_base", "NOT_ARRAY", "INTERNAL_STEP"]

_HEAPTYPE = 1 << 9
_IMMUTABLETYPE = 1 << 8
#: references never followed: values with nothing inside, classes and modules
_SKIP = (str, bytes, bytearray, int, float, complex, bool, type(None), range, slice, type,
         types.ModuleType, types.BuiltinFunctionType, types.CodeType, memoryview)
#: how a path step into what a C object references internally starts
INTERNAL_STEP = ".<internal "
#: class -> whether some class of its MRO is implemented in C
_NATIVE: "weakref.WeakKeyDictionary[type, bool]" = weakref.WeakKeyDictionary()


def native(cls: type) -> bool:
    """True when a class of ``cls``'s MRO (``object`` aside) is implemented in C: a static
    type, or one built from a C spec (immutable). Its instances may hold references that
    neither ``__dict__`` nor ``__slots__`` shows. A class written in Python is not.

    Example:
        >>> import itertools
        >>> native(itertools.cycle), native(type("A", (), {}))
        (True, False)
    """
    try:
        return _NATIVE[cls]
    except (KeyError, TypeError):
        pass
    found = any(not (c.__flags__ & _HEAPTYPE) or bool(c.__flags__ & _IMMUTABLETYPE)
                for c in cls.__mro__ if c is not object)
    try:
        _NATIVE[cls] = found
    except TypeError:  # a class without weak references: not cached
        pass
    return found


def internal_refs(obj: Any, covered: AbstractSet[int] = frozenset()) -> Iterator[tuple[Any, str]]:
    """(referent, path step) for what ``obj`` references internally, leaving out what
    ``covered`` (ids: its ``__dict__`` and attribute values, walked as attributes already)
    and values with nothing inside. The step is ``.<internal TYPE>``, and
    ``.<internal TYPE #2>``, ``#3``... for further referents of the same type, in the
    order the collector lists them (the same for every snapshot of one object).

    Example:
        >>> import itertools
        >>> it = itertools.cycle(iter([[1.0]]))
        >>> _ = next(it)
        >>> [step for _, step in internal_refs(it)]
        ['.<internal list_iterator>', '.<internal list>']
    """
    try:
        refs = gc.get_referents(obj)
    except Exception:  # noqa: BLE001 - an object that cannot be traversed: not opened
        return
    counts: dict[str, int] = {}
    for ref in refs:
        if isinstance(ref, _SKIP) or id(ref) in covered:
            continue
        name = type(ref).__name__
        n = counts[name] = counts.get(name, 0) + 1
        yield ref, f"{INTERNAL_STEP}{name}>" if n == 1 else f"{INTERNAL_STEP}{name} #{n}>"


#: numpy's array types, (name, module): numpy itself is not imported
_ARRAY_TYPES = frozenset({("ndarray", "numpy"), ("memmap", "numpy"), ("matrix", "numpy"),
                          ("recarray", "numpy.rec")})
#: what :func:`array_base` returns for an object that is not a numpy array
NOT_ARRAY = object()


def array_base(obj: Any) -> Any:
    """What a numpy array shares its memory with (``.base``: the tensor ``t.numpy()`` was
    made from, or the array a view views), None for an array that owns its memory, and
    :data:`NOT_ARRAY` for anything else. Numpy arrays show no references to
    :func:`gc.get_referents`, so the walks read ``.base`` themselves.

    Example:
        >>> array_base("not an array") is NOT_ARRAY
        True
    """
    cls = type(obj)
    if (cls.__name__, getattr(cls, "__module__", "")) not in _ARRAY_TYPES:
        return NOT_ARRAY
    return getattr(obj, "base", None)


def internal_owner(path: str) -> str | None:
    """The path of the C object whose internal reference ``path`` goes through (``stream``
    for ``stream.<internal list>``), or None for a path without such a step.

    Example:
        >>> internal_owner("self.stream.<internal list>"), internal_owner("logs['a']")
        ('self.stream', None)
    """
    at = path.find(INTERNAL_STEP)
    return path[:at] if at > 0 else None


def binding_statement(path: str, files: list[str], function: str | None,
                      owner_type: str | None) -> "Statement | None":
    """For a path inside a C object (``dataloader.<internal list>``), the statement that
    binds the object by calling its type (``dataloader = itertools.cycle(dataloader)``
    for a ``cycle``), among the statements that bind the object's name; None when there
    is no such statement (or ``path`` is not inside a C object)."""
    from torchmem.doctor.source import find_statements
    from torchmem.doctor.statement_rank import best_statement

    if owner_type is None or internal_owner(path) is None:
        return None
    found = [s for s in find_statements(path, files)
             if s.kind in ("assign", "rebind") and s.value and _calls_type(s.value, owner_type)
             and not (_bare_call(s.value) and owner_type in _defined_names(s.file))]
    return best_statement(found, "container", function=function)


def _outer_call(value: str) -> ast.Call | None:
    try:
        node = ast.parse(value, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    return node if isinstance(node, ast.Call) else None


def _calls_type(value: str, owner_type: str) -> bool:
    """Whether ``value`` is a call of the type itself (``itertools.cycle(x)``, ``cycle(x)``):
    the object bound is what that call returns (``iter(cycle(x))`` binds an ``iter``)."""
    call = _outer_call(value)
    if call is None:
        return False
    func = call.func
    return (isinstance(func, ast.Name) and func.id == owner_type) or \
        (isinstance(func, ast.Attribute) and func.attr == owner_type)


def _bare_call(value: str) -> bool:
    call = _outer_call(value)
    return call is not None and isinstance(call.func, ast.Name)


def _defined_names(file: str) -> set[str]:
    """Functions and classes a file defines: a bare call of one of those names is the
    file's own function, not the C type of the same name."""
    from torchmem.doctor.source import load_tree

    parsed = load_tree(file)
    if parsed is None:
        return set()
    return {n.name for n in ast.walk(parsed[0])
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def describe(path: str, owner_type: str | None, inner_type: str) -> str:
    """The evidence line that says what a path inside a C object is.

    Example:
        >>> describe("stream.<internal list>", "cycle", "list")[:46]
        '`stream` is a `cycle` object implemented in C;'
    """
    owner = internal_owner(path)
    what = f"a `{owner_type}` object" if owner_type else "an object"
    return (f"`{owner}` is {what} implemented in C; `{path}` is a {inner_type} it references "
            "internally (no attribute names it: found with gc.get_referents)")
