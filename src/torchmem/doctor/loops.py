"""The repeating unit of a script with no optimizer, no ``backward()`` and no model: a loop.

Scripts that only loop over a ``DataLoader``, create tensors in a ``for`` loop or run
hand-written tensor code still repeat something; that something is the user's innermost
``for``/``while`` loop whose iterations run tensor work. :class:`LoopTracer` finds it and
reports the end of each of its iterations.

How: a global trace function (``sys.settrace``, this thread only) is installed when the
script starts and removed as soon as the script shows a better step source (an optimizer
step, a ``backward()`` or a top-level module forward: :mod:`torchmem.doctor.steps`), so a
training script pays for it only until its first forward. It returns a line tracer only
for frames of the user's code objects that contain a loop (known from the file's ``ast``);
everything else (torch, the standard library, the user's loop-free functions) runs
untraced after one call of the global function. In a traced frame a line event on a loop's
header line is the start of an iteration, so the previous iteration just ended.

An iteration "runs tensor work" when, during it, a Python function of the ``torch``
package was called or a line of the user's code that names the ``torch`` module (or a
name imported from it) ran. The first loop with two such iterations in a row becomes the
unit (inner loops finish iterations before the loops around them do, so it is the
innermost one); it is replaced when another loop runs eight iterations with tensor work
while the unit runs none (a preprocessing loop before the real one).

Cost while installed: one Python call per Python function call (the global function, a
dict look-up for known code objects), plus one per line in user frames that contain a loop.
Measured in ``benchmarks/doctor_loop_cost.py``.

Known limitations:
    * Not installed when a debugger, coverage tool or profiler already traces the thread
      (``sys.gettrace()`` is set): such a script has no loop steps.
    * Only the thread that runs the script is traced; loops in other threads are not seen.
    * A loop whose tensor work happens only in C (``torch.empty``) called through
      names not imported from ``torch`` (``t.new_zeros`` on an argument) is not seen to
      run tensor work.
    * Repeated calls of the same user function from a library's loop are not a unit.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
from types import CodeType, FrameType
from typing import Any, Callable

__all__ = ["LoopTracer", "loop_lines"]

#: iterations with tensor work in a row that make a loop the unit
_ADOPT = 2
#: iterations with tensor work of another loop, while the unit ran none, that replace it
_REPLACE = 8

_FileInfo = tuple[dict[int, int], frozenset[int]]  # header line -> last body line; torch lines
_FILES: dict[str, _FileInfo | None] = {}


def _torch_names(tree: ast.AST) -> set[str]:
    """Names bound to the torch module or to things imported from it."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module == "torch" or node.module.startswith("torch.")):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def loop_lines(filename: str) -> _FileInfo | None:
    """For one source file: its loop header lines (with the last line of each loop) and
    the lines whose statement names ``torch`` or a name imported from it. None when the
    file cannot be read or parsed. Cached per file."""
    if filename in _FILES:
        return _FILES[filename]
    info: _FileInfo | None = None
    try:
        source = "".join(linecache.getlines(filename))
        if source:
            tree = ast.parse(source, filename)
            headers = {node.lineno: getattr(node, "end_lineno", node.lineno) or node.lineno
                       for node in ast.walk(tree)
                       if isinstance(node, (ast.For, ast.AsyncFor, ast.While))}
            names = _torch_names(tree)
            torch_lines: set[int] = set()
            if names:
                for node in ast.walk(tree):
                    if isinstance(node, ast.Name) and node.id in names:
                        torch_lines.add(node.lineno)
            info = (headers, frozenset(torch_lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        info = None
    _FILES[filename] = info
    return info


class _Loop:
    """Bookkeeping of one loop (a code object and a header line)."""

    __slots__ = ("key", "mark", "run", "total")

    def __init__(self, key: tuple[CodeType, int]) -> None:
        self.key = key
        self.mark = 0       # tensor-work counter when the iteration in progress started
        self.run = 0        # iterations with tensor work in a row
        self.total = 0      # iterations with tensor work since the unit last iterated


class LoopTracer:
    """Reports the end of each iteration of the user's innermost loop with tensor work.

    Args:
        is_user_file: which files are the user's code.
        torch_dir: the torch package directory (calls into it are tensor work).
        on_iteration: ``on_iteration(frame, changed)`` at the end of each iteration of
            the unit; ``changed`` is True on the first iteration of a new unit.

    Attributes:
        installed: whether the trace function is installed now.
        unit: ``(filename, header line)`` of the loop that is the unit, or None.
    """

    def __init__(self, is_user_file: Callable[[str], bool], torch_dir: str,
                 on_iteration: Callable[[FrameType, bool], None]) -> None:
        self._is_user_file = is_user_file
        self._torch_prefix = os.path.join(torch_dir, "")
        self._on_iteration = on_iteration
        self._codes: dict[CodeType, Any] = {}  # code -> (headers, torch lines) | False (torch) | None
        self._loops: dict[tuple[CodeType, int], _Loop] = {}
        self._last: dict[int, int] = {}  # id(frame) -> its previous line event
        self._work = 0
        self._unit: _Loop | None = None
        self.installed = False
        self._global_fn = self._make_global()

    @property
    def unit(self) -> tuple[str, int] | None:
        if self._unit is None:
            return None
        return self._unit.key[0].co_filename, self._unit.key[1]

    # -- install ------------------------------------------------------------------------
    def install(self) -> bool:
        """Install in this thread unless something else traces it; True if installed."""
        if sys.gettrace() is not None:
            return False
        sys.settrace(self._global_fn)
        self.installed = True
        return True

    def uninstall(self) -> bool:
        """Stop tracing (frames traced so far drop their line tracer at their next
        event); True if the tracer was installed."""
        was = self.installed
        self.installed = False
        if was and sys.gettrace() is self._global_fn:
            sys.settrace(None)
        return was

    # -- trace functions ----------------------------------------------------------------
    def _classify(self, code: CodeType) -> Any:
        filename = code.co_filename
        if filename.startswith(self._torch_prefix):
            kind: Any = False
        elif not self._is_user_file(filename):
            kind = None
        else:
            info = loop_lines(filename)
            kind = None
            if info is not None:
                headers, torch_lines = info
                lines = [line for _, _, line in code.co_lines() if line is not None]
                first, last = (min(lines), max(lines)) if lines else (0, -1)
                own = {h: end for h, end in headers.items() if first <= h <= last}
                mine = frozenset(t for t in torch_lines if first <= t <= last)
                kind = (own, mine) if (own or mine) else None
        self._codes[code] = kind
        return kind

    def _make_global(self) -> Callable[[FrameType, str, Any], Any]:
        codes = self._codes
        tracer = self

        def trace(frame: FrameType, event: str, arg: Any) -> Any:
            if not tracer.installed:
                return None
            code = frame.f_code
            try:
                kind = codes[code]
            except KeyError:
                kind = tracer._classify(code)
            if kind is False:
                tracer._work += 1
                return None
            if kind is None:
                return None
            return tracer._line

        return trace

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.installed:
            return None
        if event == "line":
            kind = self._codes.get(frame.f_code)
            if kind:
                headers, torch_lines = kind
                line = frame.f_lineno
                if line in torch_lines:
                    self._work += 1
                end = headers.get(line)
                if end is not None:
                    # back from the loop's own body: an iteration ended; else it starts
                    self._header(frame, line, line < self._last.get(id(frame), 0) <= end)
                self._last[id(frame)] = line
        elif event == "return":
            self._last.pop(id(frame), None)
        return self._line

    def _header(self, frame: FrameType, line: int, back_edge: bool) -> None:
        key = (frame.f_code, line)
        loop = self._loops.get(key)
        if loop is None:
            loop = self._loops[key] = _Loop(key)
        worked = self._work > loop.mark
        loop.mark = self._work
        if not back_edge:
            loop.run = 0
            return
        loop.run = loop.run + 1 if worked else 0
        if self._unit is loop:
            self._reset_totals()
            self._report(frame, False)
            return
        if worked:
            loop.total += 1
        if (self._unit is None and loop.run >= _ADOPT) or (
                self._unit is not None and loop.total >= _REPLACE):
            self._unit = loop
            self._reset_totals()
            self._report(frame, True)

    def _report(self, frame: FrameType, changed: bool) -> None:
        try:
            self._on_iteration(frame, changed)
        finally:
            # On Python < 3.13, after a trace function returns (or raises) CPython writes
            # the frame's f_locals dict back into its variables, deleting those missing
            # from it; the analysis empties that dict when it reads the locals
            # (culprit.read_locals), so it is filled again from the variables here.
            if sys.version_info < (3, 13):
                frame.f_locals  # noqa: B018 - the read refreshes the dict

    def _reset_totals(self) -> None:
        for other in self._loops.values():
            other.total = 0
