"""Validate plain JSON data against a record's schema before building it (no torch).

The schema is not written by hand: it is derived from the dataclass type hints of the
record (``int``, ``float``, ``str``, ``bool``, ``X | None``, ``tuple[X, ...]``,
``dict[str, X]``, nested records, ``Any`` for free JSON), refined by the field
``metadata`` that :func:`bounds` builds (``min``/``max`` of the numbers inside the field,
``max_items`` of its lists and objects). A new field of a record is validated as soon
as it is declared.

Beyond the declared types, every value must be sane: numbers finite and of magnitude
below ``2**63``, strings at most :data:`MAX_STRING` characters and valid Unicode (no
unpaired surrogate), lists and objects at most :data:`MAX_ITEMS` entries, free JSON at
most :data:`MAX_DEPTH` levels deep. Free JSON is walked without recursion, so deep
nesting is refused, never a ``RecursionError``.

Example:
    >>> from torchmem.model.capture import StepRecord
    >>> validate(StepRecord, {"step": 1, "time": "abc"}, "steps[3]")
    Traceback (most recent call last):
    ...
    torchmem.model.schema.SchemaError: steps[3].time: expected a finite number, got "abc"
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import re
import types
import typing
from typing import Any, Callable, Mapping

__all__ = [
    "SchemaError", "validate", "bounds", "NON_NEGATIVE",
    "MAX_MAGNITUDE", "MAX_STRING", "MAX_ITEMS", "MAX_DEPTH",
]

#: Every number must be strictly smaller than this in magnitude (int64 range).
MAX_MAGNITUDE = 2**63
#: Longest string accepted, in characters.
MAX_STRING = 1 << 20
#: Most entries of a list or an object, unless a field declares fewer.
MAX_ITEMS = 10_000_000
#: Deepest nesting of free JSON (``Any`` fields such as ``Finding.data``).
MAX_DEPTH = 32

_KEY = "torchmem.schema"
_SURROGATE = re.compile("[\ud800-\udfff]")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}\Z")


def bounds(*, min: float | None = None, max: float | None = None,
           max_items: int | None = None) -> dict[str, Any]:
    """Field metadata: the range of the numbers inside a field and its most entries.

    Use as ``field(default=0, metadata=bounds(min=0))``. ``min``/``max`` apply to every
    number in the field (the values of a ``dict[str, int]``, the items of a tuple);
    ``max_items`` to the field's own list or object.
    """
    return {_KEY: {"min": min, "max": max, "max_items": max_items}}


#: Metadata of a field whose numbers are counts or byte sizes.
NON_NEGATIVE = bounds(min=0)


class SchemaError(ValueError):
    """Data does not match its record's schema.

    Attributes:
        path: where, e.g. ``steps[3].time``.
        expected: what the schema wants there, e.g. ``a finite number``.
        got: a short, printable description of what was found.
    """

    def __init__(self, path: str, expected: str, got: str) -> None:
        self.path = path or "<top level>"
        self.expected = expected
        self.got = got
        super().__init__(f"{self.path}: expected {expected}, got {got}")


def describe(value: Any) -> str:
    """A short description of ``value`` that is safe to print on a terminal (ASCII only)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value.bit_length() > 100:
            return f"an integer of {value.bit_length()} bits"
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, str):
        if len(value) > 40:
            return f"a string of {len(value)} characters"
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} items" if value else "an empty list"
    if isinstance(value, Mapping):
        return f"an object with {len(value)} keys" if value else "an empty object"
    return f"a {type(value).__name__}"


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if isinstance(key, str) and _IDENT.match(key):
        return f"{path}.{key}" if path else key
    shown = json.dumps(key[:40] if isinstance(key, str) else str(key), ensure_ascii=True)
    return f"{path}[{shown}]"


class _Bad(Exception):
    """Internal: a mismatch found deep inside; the path is collected on the way out."""

    def __init__(self, expected: str, got: str) -> None:
        super().__init__(expected)
        self.expected = expected
        self.got = got
        self.parts: list[Any] = []


def _bad(expected: str, value: Any) -> _Bad:
    return _Bad(expected, describe(value))


Check = Callable[[Any], None]


def validate(cls: type, data: Any, path: str = "") -> None:
    """Check that ``data`` can build record class ``cls``; unknown keys are ignored.

    Raises:
        SchemaError: the first value that does not match, with its path.
    """
    try:
        _compile(cls, ())(data)
    except _Bad as bad:
        where = path
        for part in reversed(bad.parts):
            where = _join(where, part)
        raise SchemaError(where, bad.expected, bad.got) from None


def _frozen(limits: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, v) for k, v in limits.items() if v is not None))


@functools.lru_cache(maxsize=None)
def _compile(tp: Any, limits: tuple[tuple[str, Any], ...]) -> Check:
    """A function that checks a value against type ``tp`` (built once per type and limits)."""
    lim = dict(limits)
    inner = _frozen({k: v for k, v in lim.items() if k != "max_items"})
    most = lim.get("max_items") or MAX_ITEMS
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _union(args, limits)
    if tp is Any:
        return _check_json
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _record(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    if origin in (tuple, list):
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return _fixed_tuple(tuple(_compile(a, inner) for a in args))
        return _sequence(_compile(args[0] if args else Any, inner), most)
    if origin is dict:
        return _mapping(_compile(args[1] if len(args) == 2 else Any, inner), most)
    if tp is bool:
        return _check_bool
    if tp is int:
        return _number(lim.get("min"), lim.get("max"), integer=True)
    if tp is float:
        return _number(lim.get("min"), lim.get("max"), integer=False)
    if tp is str:
        return _check_str
    raise TypeError(f"the capture schema cannot check values of type {tp!r}")


def _union(args: tuple[Any, ...], limits: tuple[tuple[str, Any], ...]) -> Check:
    optional = type(None) in args
    options = [a for a in args if a is not type(None)]
    checks = [_compile(a, limits) for a in options]
    if len(checks) == 1:
        only = checks[0]

        def check_optional(value: Any) -> None:
            if value is None and optional:
                return
            only(value)
        return check_optional
    names = " or ".join(_type_name(o) for o in options)

    def check_union(value: Any) -> None:
        if value is None and optional:
            return
        for check in checks:
            try:
                check(value)
                return
            except _Bad:
                continue
        raise _bad(names, value)
    return check_union


def _record(cls: type) -> Check:
    hints = typing.get_type_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        if f.init:
            required = (f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING)
            hint = hints[f.name]
            fields.append((f.name, hint, _frozen(f.metadata.get(_KEY, {})), required))
    compiled: list[tuple[str, Check, bool, str]] = []

    def check_record(value: Any) -> None:
        if not compiled:  # compiled on first use: records may refer to each other
            compiled.extend((n, _compile(h, lim), r, _type_name(h)) for n, h, lim, r in fields)
        if not isinstance(value, Mapping):
            raise _bad("an object", value)
        for name, check, required, expected in compiled:
            if name in value:
                try:
                    check(value[name])
                except _Bad as bad:
                    bad.parts.append(name)
                    raise
            elif required:
                missing = _Bad(expected, "nothing (the field is missing)")
                missing.parts.append(name)
                raise missing
    return check_record


def _enum(tp: type[enum.Enum]) -> Check:
    allowed = [m.value for m in tp]
    expected = "one of " + ", ".join(map(describe, allowed))

    def check_enum(value: Any) -> None:
        if isinstance(value, bool) or value not in allowed:
            raise _bad(expected, value)
    return check_enum


def _sequence(item: Check, most: int) -> Check:
    def check_sequence(value: Any) -> None:
        if not isinstance(value, (list, tuple)):
            raise _bad("a list", value)
        if len(value) > most:
            raise _bad(f"at most {most} entries", value)
        for i, v in enumerate(value):
            try:
                item(v)
            except _Bad as bad:
                bad.parts.append(i)
                raise
    return check_sequence


def _fixed_tuple(items: tuple[Check, ...]) -> Check:
    def check_tuple(value: Any) -> None:
        if not isinstance(value, (list, tuple)):
            raise _bad("a list", value)
        if len(value) != len(items):
            raise _bad(f"a list of {len(items)} items", value)
        for i, (check, v) in enumerate(zip(items, value)):
            try:
                check(v)
            except _Bad as bad:
                bad.parts.append(i)
                raise
    return check_tuple


def _mapping(item: Check, most: int) -> Check:
    def check_mapping(value: Any) -> None:
        if not isinstance(value, Mapping):
            raise _bad("an object", value)
        if len(value) > most:
            raise _bad(f"at most {most} entries", value)
        for key, v in value.items():
            try:
                _check_str(key)
            except _Bad as bad:
                bad.parts.append("<key>")
                raise
            try:
                item(v)
            except _Bad as bad:
                bad.parts.append(key)
                raise
    return check_mapping


def _check_bool(value: Any) -> None:
    if not isinstance(value, bool):
        raise _bad("true or false", value)


def _number(low: float | None, high: float | None, *, integer: bool) -> Check:
    kind = "an integer" if integer else "a number"
    plain = "an integer" if integer else "a finite number"

    def check_number(value: Any) -> None:
        t = type(value)
        if t is int or (t is float and not integer):
            # NaN and infinities fail this comparison too
            if not -MAX_MAGNITUDE < value < MAX_MAGNITUDE:
                if t is float and not math.isfinite(value):
                    raise _bad(plain, value)
                raise _bad(f"{kind} of magnitude below 2**63", value)
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or (
                integer and isinstance(value, float)):
            raise _bad(plain, value)
        else:  # a subclass of int or float
            check_number(int(value) if isinstance(value, int) else float(value))
            return
        if low is not None and value < low:
            raise _bad(f"{kind} >= {low:g}", value)
        if high is not None and value > high:
            raise _bad(f"{kind} <= {high:g}", value)
    return check_number


_check_int = _number(None, None, integer=True)
_check_float = _number(None, None, integer=False)


def _check_str(value: Any) -> None:
    if type(value) is not str and not isinstance(value, str):
        raise _bad("a string", value)
    if len(value) > MAX_STRING:
        raise _bad(f"a string of at most {MAX_STRING} characters", value)
    if _SURROGATE.search(value):
        raise _Bad("valid Unicode text", "a string with an unpaired surrogate")


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp) if a is not type(None))
    if tp is int:
        return "an integer"
    if tp is float:
        return "a finite number"
    if tp is str:
        return "a string"
    if tp is bool:
        return "true or false"
    if origin in (tuple, list):
        return "a list"
    if origin is dict or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return "an object"
    return "a JSON value"


def _check_json(value: Any) -> None:
    """Free JSON: sane scalars, bounded sizes, at most :data:`MAX_DEPTH` levels (no recursion)."""
    stack: list[tuple[Any, tuple[Any, ...], int]] = [(value, (), 0)]
    while stack:
        node, parts, depth = stack.pop()
        try:
            if node is None or isinstance(node, bool):
                continue
            if isinstance(node, int):
                _check_int(node)
            elif isinstance(node, float):
                _check_float(node)
            elif isinstance(node, str):
                _check_str(node)
            elif isinstance(node, (list, tuple, Mapping)):
                if depth >= MAX_DEPTH:
                    raise _Bad(f"at most {MAX_DEPTH} levels of nesting", "deeper nesting")
                if len(node) > MAX_ITEMS:
                    raise _bad(f"at most {MAX_ITEMS} entries", node)
                if isinstance(node, Mapping):
                    for key, item in node.items():
                        try:
                            _check_str(key)
                        except _Bad as bad:
                            bad.parts.append("<key>")
                            raise
                        stack.append((item, (*parts, key), depth + 1))
                else:
                    stack.extend((item, (*parts, i), depth + 1) for i, item in enumerate(node))
            else:
                raise _bad("a JSON value", node)
        except _Bad as bad:
            bad.parts.extend(reversed(parts))
            raise
