"""Private mechanics: free a storage now, and make its surviving tensors fail clearly.

``untyped_storage().resize_(0)`` hands a storage's bytes back to the allocator while
Python names, closures and cycles still point at tensors over it. Torch does not check
bounds when a kernel reads such a tensor (reading it can crash the process), so every
tensor object torchmem knows over a freed storage has its class swapped to
:class:`ReleasedTensor` (or :class:`ReleasedParameter`), whose ``__torch_function__``
raises :class:`~torchmem.errors.ReleasedTensorError` naming who released it and where.
Methods, ``torch.*`` functions, operators, indexing and properties such as ``.shape``
all go through ``__torch_function__``; ``repr()``/``str()`` print a placeholder instead
of raising, so debuggers and logs keep working.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable

import torch

from torchmem.errors import ReleasedTensorError

__all__ = [
    "ReleasedTensor",
    "ReleasedParameter",
    "is_released",
    "free_storage",
    "mark_released",
    "caller_location",
    "use_count",
]

_INFO = "_torchmem_released_by"
_TIP = (
    "keep what you need past the scope with `out = s.keep(t)` (or return it from an "
    "@torchmem.scoped function); see docs/scopes.md"
)


def _message(t: Any) -> str:
    by = t.__dict__.get(_INFO, "torchmem") if hasattr(t, "__dict__") else "torchmem"
    return (
        f"torchmem: this tensor's memory was released by {by}; expected a live tensor, "
        "got a released one"
    )


def _find_released(value: Any, depth: int = 0) -> Any:
    if isinstance(value, (ReleasedTensor, ReleasedParameter)):
        return value
    if depth < 3 and isinstance(value, (list, tuple)):
        for v in value:
            found = _find_released(v, depth + 1)
            if found is not None:
                return found
    if depth < 3 and isinstance(value, dict):
        for v in value.values():
            found = _find_released(v, depth + 1)
            if found is not None:
                return found
    return None


def _raise(args: Any, kwargs: Any) -> None:
    culprit = _find_released(args)
    if culprit is None and kwargs:
        culprit = _find_released(kwargs)
    raise ReleasedTensorError(_message(culprit), tip=_TIP)


def _repr(self: Any) -> str:
    return f"<released tensor: freed by {self.__dict__.get(_INFO, 'torchmem')}>"


class _Released:
    """Behaviour shared by released tensors and parameters (no state: ``__slots__ = ()``
    keeps the instance layout unchanged, which the ``__class__`` swap requires)."""

    __slots__ = ()

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.Tensor.__hash__:
            return object.__hash__(args[0])
        _raise(args, kwargs)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return _repr(self)

    def __str__(self) -> str:
        return _repr(self)

    def __format__(self, spec: str) -> str:
        return _repr(self)


# the mixin's __repr__ replaces Tensor's on purpose; mypy cannot see the two agree
class ReleasedTensor(_Released, torch.Tensor):  # type: ignore[misc]
    """A tensor whose storage torchmem freed. Every torch operation on it raises."""


class ReleasedParameter(_Released, torch.nn.Parameter):  # type: ignore[misc]
    """A parameter whose storage :func:`torchmem.release` freed."""


def is_released(t: Any) -> bool:
    """True when ``t`` is a tensor torchmem released."""
    return isinstance(t, (ReleasedTensor, ReleasedParameter))


def mark_released(tensors: Iterable[torch.Tensor], by: str) -> int:
    """Swap the class of each plain tensor or parameter to its released twin.

    Tensor subclasses other than ``nn.Parameter`` keep their class (their storage is
    freed all the same). Returns the number of objects swapped.
    """
    n = 0
    for t in tensors:
        cls = type(t)
        if cls is torch.Tensor:
            new: type = ReleasedTensor
        elif cls is torch.nn.Parameter:
            new = ReleasedParameter
        else:
            continue
        try:
            t.__dict__[_INFO] = by
            t.__class__ = new
        except (TypeError, AttributeError):
            continue
        n += 1
    return n


def free_storage(st: Any) -> int:
    """Resize an untyped storage to 0 bytes; return the bytes freed (0 if impossible)."""
    try:
        n = int(st.nbytes())
        if n == 0 or not st.resizable():
            return 0
        st.resize_(0)
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return 0
    return n


_use_count = getattr(torch._C, "_storage_Use_Count", None)


def use_count(st: Any) -> int | None:
    """References to a storage's ``StorageImpl`` (tensor impls + Python storage objects),
    or ``None`` when this torch build does not expose it."""
    if _use_count is None:
        return None
    try:
        return int(_use_count(st._cdata))
    except (RuntimeError, TypeError, AttributeError):
        return None


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def caller_location(skip_prefix: str = "torchmem") -> str:
    """``file:line`` of the first frame outside torchmem and contextlib."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith(skip_prefix) or module == "contextlib"):
            return f"{_short(frame.f_code.co_filename)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "<unknown>"
