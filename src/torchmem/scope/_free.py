"""Private mechanics: free a storage now, and make its surviving tensors fail clearly.

``untyped_storage().resize_(0)`` hands a storage's bytes back to the allocator while
Python names, closures and cycles still point at tensors over it. Torch does not check
bounds when a kernel reads such a tensor (reading it can crash the process), so every
tensor object torchmem knows over a freed storage has its class swapped to
:class:`ReleasedTensor` (or :class:`ReleasedParameter`), whose ``__torch_function__``
raises :class:`~torchmem.errors.ReleasedTensorError` naming who released it and where.
Methods, ``torch.*`` functions, operators and indexing all go through
``__torch_function__``. Questions about the tensor that read no data (``.shape``,
``.dtype``, ``.device``, ``.size()``, ``.numel()``, ``.untyped_storage()``, ``.grad``...)
answer truthfully -- the original shape, dtype and device, and a storage of 0 bytes -- so
that ``gc``-walking recipes and other tools keep working; ``repr()``/``str()`` print a
placeholder instead of raising, so debuggers and logs keep working.

Before a storage is freed, :func:`invalidate` bumps the version counter of every
tensor over it. A tensor saved for backward by an autograd graph shares that counter,
so a backward pass that would read the freed storage raises torch's own "modified by
an inplace operation" error instead of reading freed memory: the scope and
``release`` never free what they know a graph still needs, and this is the net under
that rule.
"""

from __future__ import annotations

import functools
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
    "user_frame",
    "use_count",
    "invalidate",
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


# Attributes and methods that read no tensor data: a released tensor answers them.
_SAFE_GETTERS = frozenset({
    "shape", "dtype", "device", "layout", "ndim", "requires_grad", "is_leaf", "grad_fn",
    "grad", "_base", "data", "is_cuda", "is_cpu", "is_meta", "is_mps", "is_xpu",
    "is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn", "is_nested", "is_vulkan",
    "is_ipu", "is_xla", "is_mtia", "is_maia", "names", "name", "itemsize", "nbytes",
    "_version", "output_nr", "_grad_fn", "retains_grad", "_backward_hooks",
    "_post_accumulate_grad_hooks",
})
_SAFE_METHODS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "storage_offset",
    "element_size", "untyped_storage", "is_contiguous", "get_device", "is_floating_point",
    "is_complex", "is_signed", "is_inference", "is_pinned", "is_shared", "_is_view",
    "data_ptr", "_use_count", "is_set_to", "has_names", "type", "__len__",
    "__sizeof__", "requires_grad_", "retain_grad", "register_hook", "_typed_storage",
    "storage",
})


def _safe_funcs() -> tuple[frozenset[int], frozenset[Any]]:
    base = torch._C.TensorBase
    getters = set()
    for name in _SAFE_GETTERS:
        d = base.__dict__.get(name) or torch.Tensor.__dict__.get(name)
        if d is not None:
            getters.add(id(d))
    methods = set()
    for name in _SAFE_METHODS:
        for owner in (base, torch.Tensor):
            f = owner.__dict__.get(name)
            if f is not None:
                methods.add(f)
    return frozenset(getters), frozenset(methods)


_GETTER_IDS, _METHODS = _safe_funcs()


def _answers_metadata(func: Any) -> bool:
    if getattr(func, "__name__", None) == "__get__":
        return id(getattr(func, "__self__", None)) in _GETTER_IDS
    try:
        return func in _METHODS
    except TypeError:  # unhashable callables
        return False


def _over_freed_storage(t: torch.Tensor) -> bool:
    try:
        return t.untyped_storage().nbytes() == 0 and t.numel() > 0
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return False


def _metadata(func: Any, args: Any, kwargs: Any) -> Any:
    with torch._C.DisableTorchFunctionSubclass():
        out = func(*args, **(kwargs or {}))
    # `.data` and `._base` hand out another tensor object over the same freed storage:
    # it must fail clearly too, instead of reading freed memory.
    if isinstance(out, torch.Tensor) and not is_released(out) and _over_freed_storage(out):
        mark_released([out], _released_by(args[0]) if args else "torchmem")
    return out


def _released_by(t: Any) -> str:
    try:
        return str(t.__dict__.get(_INFO, "torchmem"))
    except AttributeError:
        return "torchmem"


class _Released:
    """Behaviour shared by released tensors and parameters (no state: ``__slots__ = ()``
    keeps the instance layout unchanged, which the ``__class__`` swap requires)."""

    __slots__ = ()

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.Tensor.__hash__:
            return object.__hash__(args[0])
        if _answers_metadata(func):
            return _metadata(func, args, kwargs)
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


_increment_version = getattr(torch.autograd.graph, "increment_version", None)


def invalidate(tensors: Iterable[torch.Tensor]) -> None:
    """Bump the version counter of each tensor (shared with its views and with the
    copies autograd saved of it), so that unpacking a saved copy raises torch's
    "modified by an inplace operation" error instead of reading a freed storage."""
    for t in tensors:
        try:
            if _increment_version is not None:
                with torch._C.DisableTorchFunctionSubclass():
                    _increment_version(t)
            else:  # pragma: no cover - torch < 2.1 has no public API for it
                torch._C._autograd._unsafe_set_version_counter((t,), (t._version + 1,))
        except (RuntimeError, TypeError, AttributeError):
            # inference tensors have no version counter: autograd never saves them
            continue


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
    return _relative(path, os.getcwd())


@functools.lru_cache(maxsize=1024)
def _relative(path: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def frame_location(frame: Any) -> str:
    """``file:line`` of ``frame`` (``<unknown>`` for ``None``)."""
    if frame is None:
        return "<unknown>"
    return f"{_short(frame.f_code.co_filename)}:{frame.f_lineno}"


def user_frame(skip_prefix: str = "torchmem") -> Any:
    """The first frame outside torchmem and contextlib (``None`` if there is none)."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith(skip_prefix) or module == "contextlib"):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def caller_location(skip_prefix: str = "torchmem") -> str:
    """``file:line`` of the first frame outside torchmem and contextlib."""
    return frame_location(user_frame(skip_prefix))
