"""Errors raised by torchmem.

Every error carries the exit code the command-line interface returns for it, and an
optional ``tip`` naming the flag or docs page that helps. Messages follow one shape:
``what happened; expected X, got Y``.
"""

from __future__ import annotations

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
