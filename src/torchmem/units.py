"""Byte quantities for people: ``format_bytes(1536) == "1.5 KiB"`` and back.

Display always uses IEC units (KiB, MiB, GiB: powers of 1024), which is what
``torch.cuda.memory_summary`` and ``nvidia-smi`` mean by "MB". Parsing accepts both
IEC (``"1.5GiB"``) and SI (``"2GB"`` = 2 * 10**9) spellings, and plain integers.

Bytes are whole: a plain number of bytes must be a whole number (``"1.5"`` and ``1.5``
are refused, ``"2.0"`` is 2), and a fraction of a larger unit is rounded to the nearest
byte, halves up (``"1.5 KiB"`` is 1536, ``"1.3 KiB"`` is 1331). Nothing is truncated
silently.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "format_bytes", "format_delta", "parse_bytes", "parse_budget", "KiB", "MiB", "GiB", "TiB",
]

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

_IEC = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2,
    "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def format_bytes(n: float, precision: int = 1) -> str:
    """Format a byte count with the largest IEC unit that keeps it >= 1.

    Args:
        n: number of bytes (may be negative or fractional).
        precision: digits after the decimal point for units above bytes.

    Returns:
        A string such as ``"0 B"``, ``"512 B"``, ``"1.5 KiB"``, ``"-12.4 MiB"``.
    """
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "n/a"
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    unit = 0
    while value >= 1024 and unit < len(_IEC) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{sign}{int(round(value))} B"
    return f"{sign}{value:.{precision}f} {_IEC[unit]}"


def format_delta(n: float, precision: int = 1) -> str:
    """Like :func:`format_bytes` but always signed: ``"+1.0 MiB"``, ``"-2 B"``, ``"+0 B"``."""
    text = format_bytes(n, precision)
    return text if text.startswith("-") or text == "n/a" else "+" + text


def parse_bytes(text: str | int | float) -> int:
    """Parse ``"1.5GiB"``, ``"512 MB"``, ``"4096"`` or a number into an integer byte count.

    A plain number of bytes (no unit, or ``B``) must be whole: ``"1.5"`` is refused, not
    truncated to 1. With a larger unit the value is rounded to the nearest byte, halves
    up: ``"1.5 KiB"`` is 1536, ``"1.3 KiB"`` is 1331.

    Raises:
        ValueError: the text is not a finite, non-negative quantity with a known unit, or
            a fractional number of bytes.
        TypeError: ``text`` is neither a string nor a number.
    """
    if isinstance(text, bool):
        raise ValueError(f"expected a byte quantity, got {text!r}")
    if isinstance(text, (int, float)):
        value, scale = float(text) if isinstance(text, float) else text, 1
    elif isinstance(text, str):
        match = _PATTERN.match(text)
        if not match or match.group(2).lower() not in _UNITS:
            raise ValueError(
                f"expected a byte quantity such as '512MiB', '2GB' or '4096'; got {text!r}"
            )
        value, scale = float(match.group(1)), _UNITS[match.group(2).lower()]
    else:
        raise TypeError(
            f"expected a byte quantity as an int or a string such as '512MiB', "
            f"got {type(text).__name__}"
        )
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a non-negative byte quantity, got {text!r}")
        return value
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a finite, non-negative byte quantity, got {text!r}")
    if scale == 1:
        if not value.is_integer():
            raise ValueError(
                f"bytes are whole; expected a whole number of bytes (or a unit, as in "
                f"'1.5 KiB'), got {text!r}"
            )
        return int(value)
    return int(math.floor(value * scale + 0.5))


def parse_budget(budget: str | int | float, who: str) -> int:
    """A memory budget given to ``torchmem.<who>``: bytes > 0, as a number or as text.

    Args:
        budget: ``6 * 2**30``, ``"6 GiB"``, ``"512MB"``... (see :func:`parse_bytes`).
        who: the public function or method the user called, for the error message.

    Returns:
        The budget in bytes.

    Raises:
        UsageError: not a byte quantity, or not above zero.
    """
    from torchmem.errors import UsageError

    tip = "pass budget=<bytes> or a string such as budget='6 GiB'"
    try:
        value = parse_bytes(budget)
    except (TypeError, ValueError):
        raise UsageError(
            f"torchmem.{who}: bad budget; expected a whole number of bytes or a string "
            f"such as '6 GiB' or '512MB', got {budget!r}",
            tip=tip,
        ) from None
    if value <= 0:
        raise UsageError(
            f"torchmem.{who}: the budget must be positive; expected bytes > 0, got {budget!r}",
            tip=tip,
        )
    return value
