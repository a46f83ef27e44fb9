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
from typing import Any, Mapping

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


@functools.lru_cache(maxsize=None)
def _fields(cls: type) -> tuple[tuple[str, Any, dict[str, Any], bool], ...]:
    """(name, type hint, bounds, required) of each init field of a record class."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f.name, hints[f.name], dict(f.metadata.get(_KEY, {})), required))
    return tuple(out)


def validate(cls: type, data: Any, path: str = "") -> None:
    """Check that ``data`` can build record class ``cls``; unknown keys are ignored.

    Raises:
        SchemaError: the first value that does not match, with its path.
    """
    _check(cls, data, path, {})


def _number_range(value: float, path: str, limits: dict[str, Any], what: str) -> None:
    low, high = limits.get("min"), limits.get("max")
    if low is not None and value < low:
        raise SchemaError(path, f"{what} >= {low:g}", describe(value))
    if high is not None and value > high:
        raise SchemaError(path, f"{what} <= {high:g}", describe(value))


def _check_int(value: Any, path: str, limits: dict[str, Any]) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchemaError(path, "an integer", describe(value))
    if not -MAX_MAGNITUDE < value < MAX_MAGNITUDE:
        raise SchemaError(path, "an integer of magnitude below 2**63", describe(value))
    _number_range(value, path, limits, "an integer")


def _check_float(value: Any, path: str, limits: dict[str, Any]) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(path, "a finite number", describe(value))
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(path, "a finite number", describe(value))
    if not -MAX_MAGNITUDE < value < MAX_MAGNITUDE:
        raise SchemaError(path, "a number of magnitude below 2**63", describe(value))
    _number_range(value, path, limits, "a number")


def _check_str(value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise SchemaError(path, "a string", describe(value))
    if len(value) > MAX_STRING:
        raise SchemaError(path, f"a string of at most {MAX_STRING} characters", describe(value))
    if _SURROGATE.search(value):
        raise SchemaError(path, "valid Unicode text", "a string with an unpaired surrogate")


def _check_items(value: Any, path: str, limits: dict[str, Any]) -> None:
    most = limits.get("max_items") or MAX_ITEMS
    if len(value) > most:
        raise SchemaError(path, f"at most {most} entries", describe(value))


def _inner(limits: dict[str, Any]) -> dict[str, Any]:
    """The limits that apply inside a container: ``max_items`` is the container's own."""
    return {k: v for k, v in limits.items() if k != "max_items"}


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
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


def _check(tp: Any, value: Any, path: str, limits: dict[str, Any]) -> None:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                _check(option, value, path, limits)
                return
            except SchemaError as err:
                errors.append(err)
        if len(errors) == 1:
            raise errors[0]
        raise SchemaError(path, " or ".join(_type_name(o) for o in options), describe(value))
    if value is None and tp is not Any:
        raise SchemaError(path, _type_name(tp), "null")
    if tp is Any:
        _check_json(value, path)
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise SchemaError(path, "an object", describe(value))
        for name, hint, field_limits, required in _fields(tp):
            where = _join(path, name)
            if name in value:
                _check(hint, value[name], where, field_limits)
            elif required:
                raise SchemaError(where, _type_name(hint), "nothing (the field is missing)")
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        allowed = [m.value for m in tp]
        if isinstance(value, bool) or value not in allowed:
            raise SchemaError(path, "one of " + ", ".join(map(describe, allowed)), describe(value))
    elif origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise SchemaError(path, "a list", describe(value))
        _check_items(value, path, limits)
        limits = _inner(limits)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise SchemaError(path, f"a list of {len(args)} items", describe(value))
            for i, (item_tp, item) in enumerate(zip(args, value)):
                _check(item_tp, item, _join(path, i), limits)
            return
        item_tp = args[0] if args else Any
        for i, item in enumerate(value):
            _check(item_tp, item, _join(path, i), limits)
    elif origin is dict:
        if not isinstance(value, Mapping):
            raise SchemaError(path, "an object", describe(value))
        _check_items(value, path, limits)
        limits = _inner(limits)
        value_tp = args[1] if len(args) == 2 else Any
        for key, item in value.items():
            _check_str(key, _join(path, "<key>"))
            _check(value_tp, item, _join(path, key), limits)
    elif tp is bool:
        if not isinstance(value, bool):
            raise SchemaError(path, "true or false", describe(value))
    elif tp is int:
        _check_int(value, path, limits)
    elif tp is float:
        _check_float(value, path, limits)
    elif tp is str:
        _check_str(value, path)
    else:  # pragma: no cover - a record declared a type this schema does not know
        raise SchemaError(path, f"a value of type {tp!r}", describe(value))


def _check_json(value: Any, path: str) -> None:
    """Free JSON: sane scalars, bounded sizes, at most :data:`MAX_DEPTH` levels (no recursion)."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        node, where, depth = stack.pop()
        if node is None or isinstance(node, bool):
            continue
        if isinstance(node, int):
            _check_int(node, where, {})
        elif isinstance(node, float):
            _check_float(node, where, {})
        elif isinstance(node, str):
            _check_str(node, where)
        elif isinstance(node, (list, tuple, Mapping)):
            if depth >= MAX_DEPTH:
                raise SchemaError(where, f"at most {MAX_DEPTH} levels of nesting",
                                  "deeper nesting")
            _check_items(node, where, {})
            if isinstance(node, Mapping):
                for key, item in node.items():
                    _check_str(key, _join(where, "<key>"))
                    stack.append((item, _join(where, key), depth + 1))
            else:
                stack.extend((item, _join(where, i), depth + 1) for i, item in enumerate(node))
        else:
            raise SchemaError(where, "a JSON value", describe(node))
