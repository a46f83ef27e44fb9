"""A capture fuzzer: every field of a real capture, replaced by every kind of bad value.

For each (field path, bad value) case the damaged capture is written to a file and read
back with :meth:`Capture.load`; then it must either be refused with one
:class:`~torchmem.errors.CaptureError`, or render as text, as HTML and as JSON again
without any other exception, within a time budget, and with no terminal control
character from the capture reaching the text output.

The fast variant covers every field path and every bad value at least once (a
deterministic sample of the cross product); the ``slow`` one runs the whole product.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import signal
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from torchmem.errors import CaptureError
from torchmem.model.capture import Capture, Culprit, Finding
from torchmem.report.html import render_html
from torchmem.report.terminal import render_capture

#: Terminal escape sequences a hostile capture could try to pass to the terminal: clear
#: screen, an OSC 8 hyperlink, an OSC 52 clipboard write, a C1 CSI, a bell, a bidi override.
ESCAPES = ("\x1b[2J\x1b[H\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07"
           "\x1b]52;c;ZWNobyBwd25lZA==\x07\x9b31m\x07\r\u202etxt.py")
_DEEP = "__torchmem_fuzz_deep__"
_DEEP_TEXT = "[" * 100_000 + "]" * 100_000
#: Control characters no text report may contain (newline and tab are the renderer's own).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: What a text report on a colour terminal may contain besides text: SGR colour codes.
SGR = re.compile("\x1b\\[[0-9;]*m")
CASE_BUDGET_S = 5.0


def _wrong_type(original: Any) -> Any:
    if isinstance(original, bool):
        return "yes"
    if isinstance(original, str):
        return 12345
    if isinstance(original, (int, float)):
        return "12"
    if isinstance(original, list):
        return "abc"
    if isinstance(original, dict):
        return [1, 2]
    return 3


#: name -> bad value (a callable receives the value it replaces).
BAD_VALUES: dict[str, Any] = {
    "null": None,
    "empty_string": "",
    "long_string": "x" * 10**6,
    "minus_one": -1,
    "huge_int": 2**80,
    "inf": math.inf,
    "minus_inf": -math.inf,
    "nan": math.nan,
    "empty_list": [],
    "empty_object": {},
    "deep_nesting": _DEEP,
    "true": True,
    "escapes": ESCAPES,
    "huge_list": list(range(100_000)),
    "wrong_type": _wrong_type,
    "float_1e308": 1e308,
    "half": 0.5,
    "lone_surrogate": "\ud800x",
    "rich_markup": "[bold][link=https://evil.example/]click[/link]:warning:",
}


def base_tree(make_capture: Callable[..., Capture]) -> dict[str, Any]:
    culprit = Culprit(name="losses", kind="local", file="/w/train.py", line=41,
                      code="losses.append(loss)", function="train", type="list")
    findings = (
        Finding(cause="retained_graph", title="retained autograd graph", device="cpu",
                bytes=20 << 20, bytes_per_step=float(1 << 20), culprit=culprit,
                evidence=("`losses` holds 20 tensors with grad_fn",),
                data={"items": 20, "end_step": 20, "shapes": [[2, 3], "x"], "ratio": 0.5},
                fix="store a number: `losses.append(loss.item())`"),
        Finding(cause="growing_container", title="", culprit=Culprit(name="cache")),
    )
    capture = make_capture(
        findings=findings, steps=8, outcome="exception", error="RuntimeError: boom",
        notes=("the fit skipped 2 warm-up steps",),
        timeline={"t": [0.0, 0.05, 0.1, 0.15], "step": [0.0, 1.0, 1.0, 2.0],
                  "cpu": [1.0e8, 1.1e8, 1.2e8, 1.3e8]},
    )
    tree = capture.to_dict()
    # every optional field present, so its path is fuzzed too
    tree["steps"][0]["reserved"] = {"cpu": 5 << 20}
    tree["steps"][0]["peak"] = {"cpu": 6 << 20}
    return tree


Path_ = tuple[Any, ...]


def field_paths(tree: Any) -> list[Path_]:
    """Every node's path (lists: their first and last element only), root excluded."""
    out: list[Path_] = []
    stack: list[tuple[Path_, Any]] = [((), tree)]
    while stack:
        path, node = stack.pop()
        if path:
            out.append(path)
        if isinstance(node, dict):
            for key in reversed(list(node)):
                stack.append(((*path, key), node[key]))
        elif isinstance(node, list) and node:
            for index in sorted({0, len(node) - 1}, reverse=True):
                stack.append(((*path, index), node[index]))
    return out


def dict_paths(tree: Any) -> list[Path_]:
    """Paths of every non-empty object (the root included): their first key gets renamed."""
    return [p for p in [(), *field_paths(tree)]
            if isinstance(_get(tree, p), dict) and _get(tree, p)]


def _get(tree: Any, path: Path_) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def mutated_text(tree: dict[str, Any], path: Path_, bad: Any) -> str:
    """The JSON text of ``tree`` with the node at ``path`` replaced by ``bad``."""
    copy = json.loads(json.dumps(tree))
    parent = _get(copy, path[:-1])
    value = bad(parent[path[-1]]) if callable(bad) else bad
    parent[path[-1]] = value
    text = json.dumps(copy, allow_nan=True)
    return text.replace(json.dumps(_DEEP), _DEEP_TEXT)


def renamed_key_text(tree: dict[str, Any], path: Path_, key: str) -> str:
    copy = json.loads(json.dumps(tree))
    node = _get(copy, path)
    first = next(iter(node))
    node[key] = node.pop(first)
    return json.dumps(copy)


class _Hang(BaseException):
    """Raised by the alarm when one case runs past its budget."""


@dataclass
class Failure:
    case: str
    stage: str
    kind: str
    site: str

    def __str__(self) -> str:
        return f"{self.kind} at {self.site} ({self.stage}; e.g. {self.case})"


def _site(tb: Any) -> str:
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if f"{os.sep}torchmem{os.sep}" in f.filename
            and f"{os.sep}tests{os.sep}" not in f.filename]
    frame = (ours or frames)[-1]
    return f"{Path(frame.filename).name}:{frame.name}:{frame.lineno}"


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang()


def _render_on_terminal(capture: Capture) -> str:
    """The text report as rich writes it to a colour terminal (styles and links on)."""
    saved = {k: os.environ.get(k) for k in ("FORCE_COLOR", "TERM", "NO_COLOR")}
    os.environ.update(FORCE_COLOR="1", TERM="xterm-256color")
    os.environ.pop("NO_COLOR", None)
    try:
        out = io.StringIO()
        render_capture(capture, file=out, width=100)
        return out.getvalue()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def check_text(name: str, text: str, tmp: Path) -> Failure | None:
    """Load one damaged capture and render it every way; return what went wrong, if anything."""
    path = tmp / "capture.json"
    path.write_text(text, encoding="utf-8")
    stage = "load"
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_BUDGET_S)
    try:
        try:
            capture = Capture.load(path)
        except CaptureError as err:
            if "\n" in err.message or CONTROL.search(err.message):
                return Failure(name, stage, "control characters in the error", "message")
            return None
        stage = "text"
        out = io.StringIO()
        render_capture(capture, file=out, width=100)
        if CONTROL.search(out.getvalue()):
            return Failure(name, stage, "control characters in the text report", "output")
        stage = "text on a colour terminal"
        if CONTROL.search(SGR.sub("", _render_on_terminal(capture))):
            return Failure(name, stage, "control characters other than colours", "output")
        stage = "html"
        render_html(capture)
        stage = "json"
        again = Capture.load(capture.save(tmp / "again.json"))
        if again.to_dict() != capture.to_dict():
            return Failure(name, stage, "JSON round trip changed the capture", "save/load")
        return None
    except _Hang as err:
        return Failure(name, stage, f"hang (> {CASE_BUDGET_S:g} s)", _site(err.__traceback__))
    except Exception as err:  # noqa: BLE001 - that is what the fuzzer looks for
        return Failure(name, stage, type(err).__name__, _site(err.__traceback__))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def all_cases(tree: dict[str, Any]) -> Iterator[tuple[str, Path_, str]]:
    """(kind, path, value name) of the whole cross product: every value x every path,
    and every object's first key renamed to a hostile string."""
    for path in field_paths(tree):
        for value in BAD_VALUES:
            yield "value", path, value
    for path in dict_paths(tree):
        yield "key", path, "escapes"


def sampled_cases(tree: dict[str, Any], per_path: int = 3) -> Iterator[tuple[str, Path_, str]]:
    """A deterministic sample: each path gets ``per_path`` values in rotation, so every
    path and every bad value is covered at least once."""
    names = list(BAD_VALUES)
    for i, path in enumerate(field_paths(tree)):
        for j in range(per_path):
            yield "value", path, names[(i * per_path + j) % len(names)]
    for path in dict_paths(tree):
        yield "key", path, "escapes"


def run(cases: Iterator[tuple[str, Path_, str]], tree: dict[str, Any],
        tmp: Path) -> tuple[int, list[Failure]]:
    count, failures = 0, []
    for kind, path, value in cases:
        label = ".".join(map(str, path)) or "<root>"
        if kind == "value":
            text = mutated_text(tree, path, BAD_VALUES[value])
            name = f"{label} = {value}"
        else:
            text = renamed_key_text(tree, path, ESCAPES)
            name = f"{label}: key renamed to escapes"
        count += 1
        failure = check_text(name, text, tmp)
        if failure is not None:
            failures.append(failure)
    return count, failures


def _summary(failures: list[Failure]) -> str:
    sites: dict[tuple[str, str], Failure] = {}
    for f in failures:
        sites.setdefault((f.kind, f.site), f)
    hangs = sum(1 for kind, _ in sites if kind.startswith("hang"))
    lines = [f"{len(failures)} failing cases, {len(sites)} distinct sites ({hangs} hangs):"]
    lines += [f"  {f}" for f in sites.values()]
    return "\n".join(lines)


def test_every_path_and_every_bad_value_is_refused_or_rendered(make_capture, tmp_path):
    tree = base_tree(make_capture)
    started = time.perf_counter()
    count, failures = run(sampled_cases(tree), tree, tmp_path)
    elapsed = time.perf_counter() - started
    print(f"\n{count} cases in {elapsed:.1f} s")
    assert not failures, _summary(failures)
    # every path and every bad value was tried
    covered = {(p, v) for kind, p, v in sampled_cases(tree) if kind == "value"}
    assert {p for p, _ in covered} == set(field_paths(tree))
    assert {v for _, v in covered} == set(BAD_VALUES)


@pytest.mark.slow
def test_exhaustive_cross_product(make_capture, tmp_path):
    tree = base_tree(make_capture)
    count, failures = run(all_cases(tree), tree, tmp_path)
    print(f"\n{count} cases")
    assert not failures, _summary(failures)
