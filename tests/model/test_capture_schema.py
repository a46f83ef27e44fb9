"""Captures are validated against a schema derived from the dataclasses, on load."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from torchmem.errors import CaptureError
from torchmem.model import capture as capture_module
from torchmem.model.capture import Capture, Finding, StepRecord
from torchmem.model.schema import (MAX_DEPTH, NON_NEGATIVE, SchemaError, bounds, describe,
                                   validate)
from torchmem.model._serde import Record


def _capture(**overrides: Any) -> Capture:
    steps = tuple(StepRecord(step=i, time=0.1 * i, used={"cpu": 1000 * i}) for i in range(1, 6))
    fields: dict[str, Any] = dict(
        tool="torchmem run", version="0", argv=("train.py",), started_at="", duration_s=1.0,
        exit_code=0, outcome="ok", devices=("cpu",), steps=steps, peak={"cpu": 5000},
        findings=(Finding(cause="retained_graph", title="t", data={"items": [1, {"a": 2}]}),),
    )
    fields.update(overrides)
    return Capture(**fields)


def _tree(**overrides: Any) -> dict[str, Any]:
    tree = _capture().to_dict()
    tree.update(overrides)
    return tree


def _error(text: str | bytes, source: str = "capture.json") -> str:
    with pytest.raises(CaptureError) as info:
        Capture.loads(text, source=source)
    message = info.value.message
    assert "\n" not in message and "\x1b" not in message
    return message


def test_the_error_names_the_path_the_expectation_and_the_value():
    tree = _tree()
    tree["steps"][3]["time"] = "abc"
    assert _error(json.dumps(tree)) == ('capture.json is not a valid torchmem capture: '
                                        'steps[3].time: expected a finite number, got "abc"')


@pytest.mark.parametrize("path, value, expected", [
    (("tool",), None, "tool: expected a string, got null"),
    (("exit_code",), True, "exit_code: expected an integer, got true"),
    (("exit_code",), 2**63, "exit_code: expected an integer of magnitude below 2**63"),
    (("exit_code",), 0.5, "exit_code: expected an integer, got 0.5"),
    (("duration_s",), "1", 'duration_s: expected a finite number, got "1"'),
    (("duration_s",), 1e300, "duration_s: expected a number of magnitude below 2**63"),
    (("steps", 0, "used", "cpu"), -1, "steps[0].used.cpu: expected an integer >= 0, got -1"),
    (("steps", 0, "step"), None, "steps[0].step: expected an integer, got null"),
    (("steps", 1), [], "steps[1]: expected an object, got an empty list"),
    (("peak",), [1, 2], "peak: expected an object, got a list of 2 items"),
    (("argv",), "train.py", 'argv: expected a list, got "train.py"'),
    (("argv", 0), "x" * 100, "argv[0]: expected a string, got a string"),
    (("error",), 3, "error: expected a string, got 3"),
    (("devices",), ["cpu"] * 1025, "devices: expected at most 1024 entries, got a list of 1025"),
    (("findings", 0, "data", "items", 1, "a"), "\ud800", "expected valid Unicode text"),
    (("findings", 0, "culprit"), "x", "findings[0].culprit: expected an object, got \"x\""),
])
def test_bad_values_are_one_clear_error(path, value, expected):
    tree = _tree()
    node = tree
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    if path == ("argv", 0):
        node[0] = 12  # a number where a string is expected
        expected = "argv[0]: expected a string, got 12"
    message = _error(json.dumps(tree))
    assert message.startswith("capture.json is not a valid torchmem capture: ")
    assert expected in message


def test_optional_fields_accept_null_and_missing_fields_take_their_default():
    tree = _tree(error=None)
    tree["steps"][0]["rss"] = None
    del tree["notes"]
    cap = Capture.loads(json.dumps(tree))
    assert cap.error is None and cap.notes == () and cap.steps[0].rss is None


def test_missing_required_field():
    tree = _tree()
    del tree["steps"][2]["time"]
    assert "steps[2].time: expected a finite number, got nothing (the field is missing)" in \
        _error(json.dumps(tree))


def test_unknown_keys_are_ignored_for_forward_compatibility():
    cap = Capture.loads(json.dumps(_tree(future_field={"x": [1, 2]})))
    assert cap.to_dict() == _capture().to_dict()


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_refused(literal):
    text = json.dumps(_tree(duration_s=12345.5)).replace("12345.5", literal)
    assert f"non-standard literal {literal}" in _error(text)


def test_deep_nesting_is_refused_without_recursion():
    # nested deeper than the schema allows, but within what the parser handles
    deep: Any = 1
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    tree = _tree()
    tree["findings"][0]["data"] = {"deep": deep}
    assert "levels of nesting" in _error(json.dumps(tree))
    # nested deeper than the JSON parser itself can go
    text = json.dumps(_tree(notes="__deep__")).replace('"__deep__"', "[" * 200_000 + "]" * 200_000)
    assert "nesting" in _error(text)


@pytest.mark.parametrize("text, expected", [
    ("", "got an empty file"),
    ("  \n ", "got an empty file"),
    (b"\xff\xfe{}", "expected UTF-8 JSON text"),
    ("[1, 2]", "expected an object with 'schema_version' and 'tool', got a list of 2 items"),
    ("42", "got 42"),
    ('"\\u001b[2J"', 'got "\\u001b[2J"'),
    ("{", "expected JSON, got a parse error"),
    ('{"schema_version": 1, "tool": "x", "exit_code": 1' + "0" * 5000 + "}",
     "is not a valid torchmem capture"),
])
def test_what_is_not_a_capture_at_all(text, expected):
    assert expected in _error(text)


@pytest.mark.parametrize("version", [True, 0, 99, "1", 1.0, None])
def test_schema_version_must_be_a_known_integer(version):
    message = _error(json.dumps(_tree(schema_version=version)))
    assert "schema_version" in message and "this torchmem reads 1..1" in message


def test_files_larger_than_the_limit_are_refused_before_parsing(tmp_path, monkeypatch):
    path = _capture().save(tmp_path / "c.json")
    size = path.stat().st_size
    assert Capture.load(path, max_bytes=size).to_dict() == _capture().to_dict()
    with pytest.raises(CaptureError, match=f"expected at most {size - 1} bytes"):
        Capture.load(path, max_bytes=size - 1)
    monkeypatch.setattr(capture_module, "MAX_CAPTURE_BYTES", 100)
    with pytest.raises(CaptureError, match="expected at most 100 bytes"):
        Capture.load(path)


def test_from_dict_validates_and_raises_a_value_error():
    tree = _tree()
    tree["steps"][0]["used"] = {"cpu": float("inf")}
    with pytest.raises(SchemaError) as info:
        Capture.from_dict(tree)
    assert isinstance(info.value, ValueError)
    assert info.value.path == "steps[0].used.cpu"


def test_the_schema_is_derived_from_the_dataclass_so_new_fields_are_checked():
    @dataclass(frozen=True)
    class Future(Record):
        name: str
        count: int = field(default=0, metadata=NON_NEGATIVE)
        sizes: tuple[int, ...] = field(default=(), metadata=bounds(min=1, max_items=2))
        extra: dict[str, float] | None = None

    validate(Future, {"name": "a", "count": 3, "sizes": [1, 2], "extra": {"x": 1.5}})
    for data, where in [({"name": "a", "count": -1}, "count"),
                        ({"name": "a", "sizes": [1, 0]}, "sizes[1]"),
                        ({"name": "a", "sizes": [1, 2, 3]}, "sizes"),
                        ({"name": "a", "extra": {"x": "y"}}, "extra.x"),
                        ({"count": 1}, "name")]:
        with pytest.raises(SchemaError) as info:
            validate(Future, data)
        assert info.value.path == where


def test_describe_is_short_and_printable():
    assert describe("\x1b]52;c;x\x07") == '"\\u001b]52;c;x\\u0007"'
    assert describe("x" * 10**6) == "a string of 1000000 characters"
    assert describe(2**80) == str(2**80) and describe(10**400).startswith("an integer of")
    assert describe(float("nan")) == "NaN" and describe({}) == "an empty object"


def test_a_long_valid_capture_loads_quickly():
    steps = tuple(StepRecord(step=i, time=0.01 * i, used={"cpu": 1000 * i}, rss=5000)
                  for i in range(1, 50_001))
    text = json.dumps(_capture(steps=steps).to_dict())
    started = time.perf_counter()
    cap = Capture.loads(text)
    assert len(cap.steps) == 50_000
    assert time.perf_counter() - started < 10.0
