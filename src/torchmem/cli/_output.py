"""Output files of the CLI (``--json``, ``--html``) and the stream the report goes to.

* Output paths are checked when the command line is parsed, before anything runs: an
  output that is also an input (the script, one of its arguments, the capture being
  rendered; compared as files, through symlinks and hard links) or named twice is
  refused, and so is one that cannot be written. Relative paths are made absolute then,
  so a script's ``os.chdir`` does not move them.
* Files are written atomically (a temporary file in the same folder, then
  ``os.replace``), with the mode ``open(path, "w")`` would give: ``0666 & ~umask`` for a
  new file, the existing file's mode otherwise. A path that is a symlink is written
  through to its target; the link stays.
* The report goes to the ``sys.stderr`` torchmem started with, even when the script
  replaced or closed its own; never raises.
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from typing import IO, Callable, Iterable, Sequence

from torchmem._files import write_file
from torchmem.errors import UsageError

__all__ = ["Output", "output", "capture_json", "script_inputs", "check_outputs", "write_text",
           "write_output",
           "ReportStream"]


@dataclass(frozen=True)
class Output:
    """One output file: the flag that named it, the path as shown, the absolute path."""

    flag: str
    shown: str
    path: str


def output(flag: str, value: str | None,
           rank_path: Callable[[str], str] | None = None) -> Output | None:
    """An :class:`Output` for ``flag value`` (after ``rank_path``), made absolute now so a
    script's ``os.chdir`` does not move it; None when not given."""
    if not value:
        return None
    shown = rank_path(value) if rank_path is not None else value
    return Output(flag, shown, os.path.abspath(shown))


def capture_json(capture: object) -> str:
    """The text :meth:`Capture.save` writes (kept identical to it)."""
    import json

    return json.dumps(capture.to_dict(), indent=1, sort_keys=False,  # type: ignore[attr-defined]
                      allow_nan=False) + "\n"


def script_inputs(path: str | None, args: Sequence[str]) -> list[tuple[str, str]]:
    """The files a script run reads or may write: the script, and its arguments that look
    like paths (``arg`` and the value of ``--opt=value``)."""
    items: list[tuple[str, str]] = []
    if path:
        script = os.path.join(path, "__main__.py") if os.path.isdir(path) else path
        items.append((f"the script {path}", script))
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value and not value.startswith("-"):
            items.append((f"the script's argument {value}", value))
    return items


def _same(a: str, b: str) -> bool:
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _unwritable(path: str) -> str | None:
    """Why ``path`` cannot be written, or None."""
    target = os.path.realpath(path)
    if os.path.isdir(target):
        return "it is a directory"
    if os.path.exists(target):
        if not os.access(target, os.W_OK):
            return "permission denied"
        return None
    parent = os.path.dirname(target)
    while parent and not os.path.exists(parent):
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    if not os.path.isdir(parent):
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"permission denied in {parent}"
    return None


def check_outputs(outputs: Sequence[Output | None], inputs: Iterable[tuple[str, str]]) -> None:
    """Refuse outputs that would overwrite an input or each other, or cannot be written.

    Args:
        outputs: the output files (``None`` entries are ignored).
        inputs: ``(what, path)`` pairs, e.g. ``("the script", "train.py")``.

    Raises:
        UsageError: one line naming the clash (exit code 2).
    """
    given = [o for o in outputs if o is not None]
    known = [(what, os.path.abspath(path)) for what, path in inputs if path]
    for i, out in enumerate(given):
        for what, path in known:
            if _same(out.path, path):
                raise UsageError(f"{out.flag} {out.shown} would overwrite {what}; expected a "
                                 "new file name", tip=f"choose another path for {out.flag}")
        for other in given[:i]:
            if _same(out.path, other.path):
                raise UsageError(f"{other.flag} and {out.flag} name the same file "
                                 f"{out.shown}; expected one file per output",
                                 tip="give each output its own path")
        reason = _unwritable(out.path)
        if reason:
            raise UsageError(f"cannot write {out.shown}: {reason}; expected a writable file "
                             "path", tip=f"choose a writable path for {out.flag}")


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically, honouring the umask, through symlinks
    (:func:`torchmem._files.write_file`).

    Raises:
        OSError: the file cannot be written (no partial file is left behind).
    """
    write_file(path, text.encode("utf-8"))


def write_output(out: Output, text: Callable[[], str], what: str) -> None:
    """Write ``text()`` to ``out`` and say so on stderr; an unwritable path is an
    :class:`~torchmem.errors.InputError` naming the flag."""
    from torchmem.errors import InputError

    try:
        write_text(out.path, text())
    except (OSError, ValueError) as err:
        raise InputError(f"cannot write {out.shown}: {getattr(err, 'strerror', None) or err}",
                         tip=f"choose a writable path for {out.flag}") from None
    print(f"{what} written to {out.shown}", file=sys.stderr)


class ReportStream:
    """Where the report goes: the ``sys.stderr`` of before the run, if the script left it
    usable; else a new stream on file descriptor 2; else nowhere."""

    def __init__(self) -> None:
        self._before = sys.stderr

    def get(self) -> IO[str]:
        for stream in (self._before, sys.stderr, sys.__stderr__):
            if stream is not None and not getattr(stream, "closed", False):
                return stream
        try:
            return open(2, "w", closefd=False, encoding="utf-8", errors="backslashreplace")
        except (OSError, ValueError):
            return io.StringIO()

    def say(self, line: str) -> None:
        """Print one line on the report stream; never raises."""
        try:
            stream = self.get()
            print(line, file=stream)
            stream.flush()
        except Exception:  # noqa: BLE001 - a broken stderr must not change the exit code
            pass
