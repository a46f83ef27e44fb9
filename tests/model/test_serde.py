"""Records round-trip through JSON-ready dicts, driven by their type hints."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field

import pytest

from torchmem.model._serde import Record


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner(Record):
    name: str
    shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class Outer(Record):
    count: int
    ratio: float
    inner: Inner
    items: tuple[Inner, ...] = ()
    by_name: dict[str, int] = field(default_factory=dict)
    maybe: Inner | None = None
    color: Color = Color.RED
    pair: tuple[int, str] = (0, "")


def test_roundtrip_through_json():
    value = Outer(3, 0.5, Inner("a", (2, 3)), (Inner("b"), Inner("c", (1,))), {"x": 1},
                  Inner("m"), Color.BLUE, (4, "four"))
    data = json.loads(json.dumps(value.to_dict()))
    assert Outer.from_dict(data) == value


def test_defaults_fill_missing_keys_and_unknown_keys_are_ignored():
    restored = Outer.from_dict({"count": 1, "ratio": 2, "inner": {"name": "z"}, "future": 9})
    assert restored == Outer(1, 2.0, Inner("z"))
    assert isinstance(restored.ratio, float)


@pytest.mark.parametrize("data", [
    {"ratio": 1.0, "inner": {"name": "z"}},                  # missing required field
    {"count": "three", "ratio": 1.0, "inner": {"name": "z"}},  # wrong type
    {"count": 1, "ratio": 1.0, "inner": "not an object"},
    {"count": True, "ratio": 1.0, "inner": {"name": "z"}},     # bool is not an int here
])
def test_bad_input_raises_value_error(data):
    with pytest.raises(ValueError):
        Outer.from_dict(data)
