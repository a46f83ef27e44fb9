"""The pytest plugin's baseline file: per-test tensor peaks, and what a regression is.

The file is JSON, written atomically (:func:`torchmem._files.write_file`)::

    {"torchmem_baseline": 1,
     "tests": {"tests/test_model.py::test_forward":
                 {"device": "cpu", "peak": 8392704,
                  "roles": {"activation": 4194304, "parameter": 4198400}}}}

``peak`` is the body's peak above what was live when it began (bytes); ``roles`` the
largest bytes each role of the storages the body created reached at its censuses (see
:mod:`torchmem._pytest_peak`; empty for a body under 1 MiB).

A test regresses when its peak is more than ``tolerance`` (a fraction) above the
recorded one on the same device. Only the standard library: the plugin loads this
module in every pytest run that names a baseline, torch or not.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from torchmem._files import write_file
from torchmem.units import format_bytes, format_delta

__all__ = ["BaselineError", "Entry", "load", "save", "regression", "FORMAT"]

#: version of the baseline file format
FORMAT = 1
_MAX_BYTES = 64 * 1024 * 1024


class BaselineError(ValueError):
    """The baseline file cannot be read as one (one line, names the file)."""


@dataclass(frozen=True)
class Entry:
    """One test's measurement."""

    device: str
    peak: int
    roles: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "peak": self.peak, "roles": dict(sorted(self.roles.items()))}


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BaselineError(f"{where}: expected a non-negative integer of bytes, got {value!r}")
    return value


def _entry(nodeid: str, raw: Any) -> Entry:
    where = f"tests[{nodeid!r}]"
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: expected an object, got {type(raw).__name__}")
    device = raw.get("device")
    if not isinstance(device, str) or not device:
        raise BaselineError(f"{where}.device: expected a device name, got {device!r}")
    roles = raw.get("roles", {})
    if not isinstance(roles, dict):
        raise BaselineError(f"{where}.roles: expected an object, got {type(roles).__name__}")
    return Entry(device=device, peak=_count(raw.get("peak"), f"{where}.peak"),
                 roles={str(k): _count(v, f"{where}.roles[{k!r}]") for k, v in roles.items()})


def load(path: str, shown: str | None = None) -> dict[str, Entry] | None:
    """The entries of the baseline at ``path`` (named ``shown`` in messages); None when
    there is no file yet.

    Raises:
        BaselineError: unreadable, not JSON, not a torchmem baseline, a newer format,
            or a value of the wrong type (the message names the file and the value).
    """
    name = shown if shown is not None else path
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise BaselineError(f"cannot read {name}: {err.strerror or err}") from None
    if len(raw) > _MAX_BYTES:
        raise BaselineError(f"{name} is larger than {format_bytes(_MAX_BYTES)}; not a baseline")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise BaselineError(f"{name} is not a torchmem baseline; expected JSON, got a parse "
                            f"error ({err})") from None
    if not isinstance(data, dict) or "torchmem_baseline" not in data:
        raise BaselineError(f"{name} is not a torchmem baseline; expected an object with "
                            "'torchmem_baseline' and 'tests'")
    version = data["torchmem_baseline"]
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT:
        raise BaselineError(f"{name} has format {version!r}; this torchmem reads 1..{FORMAT}")
    tests = data.get("tests")
    if not isinstance(tests, dict):
        raise BaselineError(f"{name}: tests: expected an object, got {type(tests).__name__}")
    try:
        return {str(k): _entry(str(k), v) for k, v in tests.items()}
    except BaselineError as err:
        raise BaselineError(f"{name} is not a valid torchmem baseline: {err}") from None


def save(path: str, entries: dict[str, Entry]) -> None:
    """Write ``entries`` (sorted by test id) atomically to ``path``."""
    data = {"torchmem_baseline": FORMAT,
            "tests": {k: entries[k].to_json() for k in sorted(entries)}}
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    write_file(path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))


def regression(nodeid: str, old: Entry, new: Entry, tolerance: float) -> str | None:
    """The failure message when ``new`` is a regression of ``old``, else None."""
    if old.device != new.device:
        return None
    allowed = old.peak * (1.0 + tolerance)
    if new.peak <= allowed:
        return None
    grew = (f"{(new.peak / old.peak - 1) * 100:.0f}%" if old.peak else "from nothing")
    lines = [f"torchmem: tensor peak of the test body grew {grew}: {format_bytes(new.peak)}, "
             f"baseline {format_bytes(old.peak)} on {new.device} (tolerance "
             f"{tolerance * 100:g}%: at most {format_bytes(math.floor(allowed))})"]
    changes = role_changes(old.roles, new.roles)
    if changes:
        lines.append("largest bytes per role of the storages the body created (baseline -> "
                     "now):")
        for role, before, after in changes:
            lines.append(f"  {role:<16} {format_bytes(before):>11} -> {format_bytes(after):>11}"
                         f"  ({format_delta(after - before)})")
        role, before, after = changes[0]
        if after > before:
            lines.append(f"the {role} bytes grew most")
    elif not new.roles and not old.roles:
        lines.append("no bytes by role: the body stayed under the 1 MiB where censuses start")
    lines.append("if the new peak is expected, record it again: --torchmem-baseline-update")
    return "\n".join(lines)


def role_changes(old: dict[str, int], new: dict[str, int]) -> list[tuple[str, int, int]]:
    """(role, before, after) for every role whose bytes changed, largest growth first."""
    roles = set(old) | set(new)
    out = [(r, old.get(r, 0), new.get(r, 0)) for r in roles if old.get(r, 0) != new.get(r, 0)]
    out.sort(key=lambda t: (-(t[2] - t[1]), t[0]))
    return out
