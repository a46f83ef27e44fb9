"""Private: an error raised deep inside names the public function the user called.

``torchmem.prefetch(loader, "cuda")`` on a machine without CUDA fails in the device
parser, whose messages start ``torchmem.read:``; the user never called ``read``. Entry
points re-raise such errors through :func:`renamed`, so the message starts with the
function the user called and the rest (what happened, expected, got, the tip) stays.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from torchmem.errors import TorchmemError

__all__ = ["renamed", "target_device"]

E = TypeVar("E", bound=TorchmemError)

_PREFIX = re.compile(r"^torchmem(?:\.[A-Za-z_][\w.]*)?: ")


def renamed(err: E, who: str, *, tip: str | None = None) -> E:
    """A copy of ``err`` whose message starts ``torchmem.<who>:``.

    Args:
        err: the error raised by an inner function.
        who: the public function the user called (``"prefetch"``, ``"Estimate.fits"``).
        tip: a tip that fits the caller better (default: the original tip).

    Returns:
        A new error of the same class (raise it ``from None``: the inner frame is noise).
    """
    message = _PREFIX.sub("", err.message, count=1)
    return type(err)(f"torchmem.{who}: {message}", tip=tip if tip is not None else err.tip)


def target_device(device: Any, who: str, *, tip: str | None = None) -> str:
    """:func:`~torchmem.collect.readings.resolve_device` for an entry point: a bad or
    missing device is a :class:`~torchmem.errors.DeviceError` naming ``who``.

    Args:
        device: the user's device argument.
        who: the public function the user called.
        tip: what to do instead (default: name a device this machine has).
    """
    from torchmem.collect.readings import resolve_device
    from torchmem.errors import DeviceError

    try:
        return resolve_device(device)
    except DeviceError as err:
        raise renamed(
            err, who,
            tip=tip or "name a device this machine has: 'cpu', or 'cuda' only where "
            "torch.cuda.is_available() is True",
        ) from None
