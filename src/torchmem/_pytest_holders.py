"""Name what holds a test's storages, and where it went above its limit (for the
messages of :mod:`torchmem.pytest_plugin`; used by :mod:`torchmem._pytest_peak`).

Holders are the variables of the user frames on the stack (innermost first) and of
their modules, one level into lists, tuples, dicts and object attributes: a bounded look
(at most 256 entries per container), never a walk of the object graph. Frames of
installed packages, the standard library, torch and torchmem are not the user's.
"""

from __future__ import annotations

import linecache
import os
import sysconfig
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch

from torchmem.collect.graph import storage_key
from torchmem.units import format_bytes

if TYPE_CHECKING:
    from torchmem._pytest_peak import PeakResult, StorageLine

__all__ = ["holders", "op_name", "outputs", "in_backward", "user_site", "describe_top",
           "peak_failure"]


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({p for p in (paths.get("purelib"), paths.get("platlib")) if p})


def holders(frame: FrameType | None, keys: set[int]) -> dict[int, str]:
    """Names of the variables of the user frames on the stack that hold ``keys``.

    Looks at each user frame's locals (innermost first), then its module's globals, one
    level into lists, tuples, dicts and object attributes. Returns key -> description.
    """
    from torchmem.doctor.culprit import read_locals
    from torchmem.doctor.steps import UserFrames

    frames = UserFrames(_library_dirs())
    found: dict[int, str] = {}

    def visit(name: str, value: Any, where: str) -> None:
        if isinstance(value, torch.Tensor):
            key = storage_key(value)
            if key in keys and key not in found:
                found[key] = f"`{name}` ({where})"
            return
        items: list[tuple[str, Any]] = []
        if isinstance(value, (list, tuple)):
            items = [(f"{name}[{i}]", v) for i, v in enumerate(value[:256])]
        elif isinstance(value, dict):
            items = [(f"{name}[{k!r}]", v) for k, v in list(value.items())[:256]
                     if isinstance(k, (str, int))]
        elif not isinstance(value, (type, torch.nn.Module)) and hasattr(value, "__dict__"):
            try:
                items = [(f"{name}.{k}", v) for k, v in list(vars(value).items())[:256]]
            except TypeError:
                items = []
        for sub, v in items:
            if isinstance(v, torch.Tensor):
                visit(sub, v, where)

    seen_globals: set[int] = set()
    f = frame
    while f is not None and len(found) < len(keys):
        if frames.is_user_file(f.f_code.co_filename):
            function = f.f_code.co_name
            if function != "<module>":
                local = read_locals(f)
                for name, value in local.items():
                    visit(name, value, f"local of {function}")
                local.clear()
            if id(f.f_globals) not in seen_globals:
                seen_globals.add(id(f.f_globals))
                module = str(f.f_globals.get("__name__", "?")).rsplit(".", 1)[-1]
                for name, value in list(f.f_globals.items()):
                    if not name.startswith("__"):
                        visit(name, value, f"global of {module}")
        f = f.f_back
    return found


def op_name(func: Any) -> str:
    name = str(getattr(func, "__name__", None) or func)
    return name.split(".", 1)[0] if name else "an op"


def outputs(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


def in_backward(frame: FrameType | None) -> bool:
    """True when autograd's engine is running on this thread (a ``backward()`` call)."""
    while frame is not None:
        if frame.f_code.co_name == "_engine_run_backward":
            return True
        frame = frame.f_back
    return False


def user_site(frame: FrameType | None, op: str) -> str:
    """``op at file:line `code` `` for the innermost user frame (or just ``op``)."""
    from torchmem.doctor.steps import UserFrames

    user = UserFrames(_library_dirs()).innermost(frame)
    if user is None:
        return op
    file, line = user.f_code.co_filename, user.f_lineno
    code = linecache.getline(file, line).strip()
    try:
        shown = os.path.relpath(file)
    except ValueError:
        shown = file
    return f"{op} at {shown}:{line}" + (f" `{code}`" if code else "")


def describe_top(lines: list[StorageLine]) -> list[str]:
    """The storage lines of a message, one per storage."""
    out = []
    for s in lines:
        shape = "(" + ", ".join(str(d) for d in s.shape) + ")"
        holder = s.holder or "held by something torchmem cannot name"
        since = "" if s.body else "  [alive before the test]"
        out.append(f"  {format_bytes(s.nbytes):>11}  {s.dtype} {shape}  {s.role}: {holder}{since}")
    return out


def peak_failure(result: PeakResult, limit: int, nodeid: str) -> str:
    """The message of a test whose peak is above its limit."""
    kind = "live tensor bytes" if result.source == "engine" else "allocator bytes"
    lines = [f"torchmem: tensor peak of the test body is {format_bytes(result.peak_delta)}, "
             f"above the limit of {format_bytes(limit)} on {result.device} "
             f"({kind} above the {format_bytes(result.at_start)} live when the body began; "
             f"absolute peak {format_bytes(result.peak)})"]
    if result.top:
        at = format_bytes(result.crossed_at) if result.crossed_at is not None else "?"
        where = f", {result.crossing}" if result.crossing else ""
        lines.append(f"largest live storages when the body went above the limit (at {at}{where}):")
        lines.extend(describe_top(result.top))
    if result.roles_then:
        shown = ", ".join(f"{r} {format_bytes(b)}" for r, b in
                          sorted(result.roles_then.items(), key=lambda rb: -rb[1]) if b)
        lines.append(f"bytes by role of the storages the body created then: {shown}")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)
