"""Plain-data conversion for torchmem's frozen dataclasses (no torch, no pickle).

``Record`` gives every model dataclass ``to_dict()`` and ``from_dict()``. Conversion is
driven by the dataclass type hints, so nested records, ``tuple[X, ...]``, ``list[X]``,
``dict[str, X]``, ``X | None`` and ``Enum`` fields round-trip through JSON unchanged.
Unknown keys in ``from_dict`` input are ignored (forward compatibility); missing keys
fall back to the field default, and a missing key without default is a ``ValueError``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, TypeVar

__all__ = ["Record", "to_plain", "from_plain"]

T = TypeVar("T", bound="Record")


def to_plain(value: Any) -> Any:
    """Convert records, enums, tuples and dicts into JSON-ready Python values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_plain(tp: Any, value: Any) -> Any:
    """Rebuild a value of type ``tp`` from what :func:`to_plain` produced."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        for option in options:
            try:
                return from_plain(option, value)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"value {value!r} matches none of {tp}")
    if tp is Any:
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"expected an object for {tp.__name__}, got {type(value).__name__}")
        return _build(tp, value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_plain(args[0], v) for v in value)
        if args:
            return tuple(from_plain(a, v) for a, v in zip(args, value))
        return tuple(value)
    if origin in (list, typing.List):
        return [from_plain(args[0] if args else Any, v) for v in value]
    if origin in (dict, typing.Dict):
        vt = args[1] if len(args) == 2 else Any
        return {k: from_plain(vt, v) for k, v in value.items()}
    if tp is float and isinstance(value, (int, float)):
        return float(value)
    if tp is int and isinstance(value, bool):
        raise ValueError("expected an integer, got a boolean")
    if isinstance(tp, type) and tp in (int, str, bool) and not isinstance(value, tp):
        raise ValueError(f"expected {tp.__name__}, got {type(value).__name__}")
    return value


def _build(cls: type, data: dict[str, Any]) -> Any:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in data:
            kwargs[f.name] = from_plain(hints[f.name], data[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{cls.__name__}: missing field {f.name!r}")
    return cls(**kwargs)


class Record:
    """Mixin for frozen dataclasses that travel through JSON captures."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of this record (nested records become dicts)."""
        return to_plain(self)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        """Rebuild a record from :meth:`to_dict` output.

        Raises:
            ValueError: a required field is missing or has the wrong type.
        """
        return _build(cls, data)  # type: ignore[no-any-return]
