"""Errors raised by torchmem.

Every error carries the exit code the command-line interface returns for it, and an
optional ``tip`` naming the flag or docs page that helps. Messages follow one shape:
``what happened; expected X, got Y``.
"""

from __future__ import annotations

import sys

__all__ = [
    "TorchmemError",
    "UsageError",
    "InputError",
    "CaptureError",
    "ScriptError",
    "ReleasedTensorError",
    "DeviceError",
    "BudgetError",
    "InputMutationError",
    "is_oom",
]


class TorchmemError(Exception):
    """Base class of every error torchmem raises on purpose.

    Attributes:
        exit_code: the process exit code the CLI returns for this error.
        tip: an optional hint shown after the message (``Tip: ...``).
    """

    exit_code: int = 1

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.tip = tip

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class UsageError(TorchmemError):
    """The command line or an API call was given arguments that cannot work."""

    exit_code = 2


class InputError(TorchmemError):
    """A file the user named is missing, unreadable, not UTF-8, or not valid Python."""

    exit_code = 2


class CaptureError(InputError):
    """A JSON capture is corrupted, truncated, or of an unsupported schema version."""


class ScriptError(TorchmemError):
    """The user's script could not be started (not an error *inside* the script)."""

    exit_code = 2


class DeviceError(TorchmemError):
    """A device was named that this torch build or machine does not have."""

    exit_code = 2


class ReleasedTensorError(RuntimeError, TorchmemError):
    """A tensor whose storage a torchmem scope or ``torchmem.release`` freed was used.

    It subclasses :class:`RuntimeError` so that code which catches torch's own errors
    keeps working.
    """

    exit_code = 1

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        RuntimeError.__init__(self, message)
        self.message = message
        self.tip = tip


class BudgetError(TorchmemError, MemoryError):
    """Work does not fit the memory budget even at its smallest size (one chunk row,
    the smallest batch). It subclasses :class:`MemoryError` so OOM handlers catch it."""

    exit_code = 1


class InputMutationError(RuntimeError, TorchmemError):
    """A function guarded by ``torchmem.no_input_mutation`` modified a tensor input in
    place. It subclasses :class:`RuntimeError` like torch's own errors."""

    exit_code = 1

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        RuntimeError.__init__(self, message)
        self.message = message
        self.tip = tip


#: Lower-case fragments of the messages torch's allocators raise when memory runs out:
#: CUDA/ROCm/XPU/MPS ("CUDA out of memory", "HIP out of memory", "XPU out of memory",
#: "MPS backend out of memory"), the CPU allocator ("DefaultCPUAllocator: can't allocate
#: memory"), and cuBLAS/cuDNN failing to allocate their workspace.
_OOM_MESSAGES = (
    "out of memory",
    "can't allocate memory",
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
)


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` means the host or a device ran out of memory.

    True for :class:`MemoryError` (Python, and :class:`BudgetError`),
    ``torch.OutOfMemoryError`` (CUDA, and torch builds that raise it elsewhere), and a
    ``RuntimeError`` whose message is one of torch's allocation failures, such as the CPU
    allocator's ``DefaultCPUAllocator: can't allocate memory: you tried to allocate N
    bytes`` or ``MPS backend out of memory``. Never imports torch.

    Example:
        >>> is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried "
        ...                     "to allocate 4096 bytes. Error code 12"))
        True
        >>> is_oom(RuntimeError("shape mismatch"))
        False
    """
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if isinstance(oom_type, type) and isinstance(exc, oom_type):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    try:
        text = str(exc).lower()
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails is not an OOM we know
        return False
    return any(fragment in text for fragment in _OOM_MESSAGES)
