"""Make capture strings safe to print on a terminal (no torch).

A capture is data from a file: its script path, culprit names, source lines, error
messages, notes and device names may hold terminal escape sequences (``ESC [2J`` clears
the screen, OSC 8 writes links, OSC 52 writes the clipboard), C1 controls, bidi
overrides, or newlines that forge extra report lines. :func:`printable` escapes every
such character visibly (``\\x1b``, ``\\n``, ``\\u202e``) and shortens very long strings;
:func:`printable_capture` applies it to every string of a capture, dict keys included,
so the text renderer never sees a raw one.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

__all__ = ["printable", "printable_capture", "CONTROL", "MAX_SHOWN"]

#: Characters never printed raw: C0 controls (newline and tab included), DEL, C1
#: controls, zero-width and bidi formatting characters, line/paragraph separators,
#: unpaired surrogates and the BOM.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069"
                     "\ud800-\udfff\ufeff]")
#: Longest string shown in full; longer ones are cut and say how much was left out.
MAX_SHOWN = 2000

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}

T = TypeVar("T")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: Any, limit: int = MAX_SHOWN) -> str:
    """``text`` as one printable line: control characters escaped, cut after ``limit``.

    Example:
        >>> printable("a\\x1b[2Jb\\nc")
        'a\\\\x1b[2Jb\\\\nc'
    """
    s = text if isinstance(text, str) else str(text)
    if len(s) > limit:
        s = f"{s[:limit]}… ({len(s) - limit} more characters)"
    return CONTROL.sub(_escape, s) if CONTROL.search(s) else s


def printable_capture(value: T) -> T:
    """A copy of a record (or plain value) with every string passed through :func:`printable`.

    Numbers and other leaves are kept; a part without strings to change is returned as is.
    """
    return _clean(value)  # type: ignore[no-any-return]


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            old = getattr(value, f.name)
            new = _clean(old)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, dict):
        if all(type(k) is str and not CONTROL.search(k) and len(k) <= MAX_SHOWN
               and type(v) in (int, float) for k, v in value.items()):
            return value  # the common case: device -> bytes
        cleaned = {_clean(k): _clean(v) for k, v in value.items()}
        same = len(cleaned) == len(value) and all(
            a is b and cleaned[a] is value[b] for a, b in zip(cleaned, value))
        return value if same else cleaned
    if isinstance(value, (list, tuple)):
        if all(type(v) in (int, float) for v in value):
            return value
        items = [_clean(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(items)
    return value
