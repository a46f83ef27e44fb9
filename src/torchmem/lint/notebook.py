"""Lint (and fix) the code cells of Jupyter notebooks (``*.ipynb``, nbformat 4).

The code cells are joined, in order, into one Python module, so that a name defined in
one cell is known in the next (as when the notebook runs top to bottom); findings are
reported per cell as ``nb.ipynb:cell_3:2:5`` (the 3rd cell of the notebook, counting
markdown cells too, line 2 of that cell, column 5).

IPython syntax is not Python. Before linting, each line that IPython would transform at
the start of a statement (``%magic``, ``!shell``, ``x = !cmd``, ``obj?``) is replaced by
a ``pass`` placeholder at the same indentation, so line numbers and blocks stay intact;
``--fix`` puts the original line back. A cell that starts with a cell magic is linted
only for the magics whose body is Python (``%%time``, ``%%timeit``, ``%%capture``,
``%%prun``); other cells (``%%bash``, ``%%writefile``...) are skipped and left alone.

``--fix`` rewrites only the ``source`` of the cells that changed, keeping each one a
string or a list of lines as it was; the rest of the document (outputs, metadata, key
order, indentation of the JSON, non-ASCII characters) is kept. Notebooks whose kernel is
not Python are skipped.

Example:
    >>> from torchmem.lint.files import lint_paths
    >>> lint_paths(["analysis.ipynb"]).violations[0].cell  # doctest: +SKIP
    3
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from torchmem.lint.discover import io_error
from torchmem.lint.violation import Edit, Violation

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.files import FileReport, SourceFile, _Options

__all__ = ["Notebook", "lint_notebook", "load_notebook"]

#: cell magics whose body is Python
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})

#: ``%time f()``: a line magic followed by one Python statement (linted, prefix kept)
_PY_LINE_MAGIC = re.compile(r"([ \t]*)(%(?:time|timeit|prun)[ \t]+)(?![-\s])(.*\S)[ \t]*$")

_EOL = re.compile(r"(\r\n|\r|\n)")
_LINE_MAGIC = re.compile(r"[ \t]*(?:[%!]|[\w.,\[\] \t]+=[ \t]*[%!]|\?{1,2}[\w.]+[ \t]*$"
                         r"|[\w.]+\?{1,2}[ \t]*$)")


def _statement_starts(lines: Sequence[str]) -> list[bool]:
    """For each line: whether it starts a statement (not inside brackets, a string or
    after a backslash continuation). Lines that look like magics are not scanned."""
    out: list[bool] = []
    depth, quote, cont = 0, "", False
    for raw in lines:
        line = raw.rstrip("\r\n")
        start = depth == 0 and not quote and not cont
        out.append(start)
        if start and _LINE_MAGIC.match(line):
            continue
        cont = False
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if quote:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(quote, i):
                    i += len(quote)
                    quote = ""
                    continue
                i += 1
                continue
            if c == "#":
                break
            if c in "'\"":
                if line.startswith(c * 3, i):
                    quote, i = c * 3, i + 3
                    continue
                j = i + 1
                while j < n and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
            elif c == "\\" and i == n - 1:
                cont = True
            i += 1
        if len(quote) == 1:  # an unterminated one-line string: a syntax error anyway
            quote = ""
    return out


@dataclass
class _Cell:
    index: int  # position in the notebook's "cells" (0-based)
    text: str  # the source as one string
    is_list: bool  # "source" was a list of lines
    magics: list[str] = field(default_factory=list)  # original lines behind placeholders
    prefixes: list[str] = field(default_factory=list)  # "%time " removed before a statement
    skipped: bool = False


@dataclass
class Notebook:
    """A parsed notebook and the Python module made of its code cells.

    Attributes:
        path: the file.
        doc: the JSON document.
        raw: the JSON text as read.
        source: the code cells joined, magics replaced, a marker comment before each.
        origin: for each line of ``source`` (index ``line - 1``), ``(cell, line)``,
            1-based, or ``None`` for a marker line.
    """

    path: str
    doc: dict[str, Any]
    raw: str
    cells: list[_Cell]
    token: str
    source: str = ""
    origin: list[tuple[int, int] | None] = field(default_factory=list)
    #: (cell, line) -> (indent width, prefix width) of the lines whose "%time " was removed
    shift: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    def marker(self, cell: _Cell) -> str:
        return f"# {self.token} cell {cell.index + 1}"

    def _placeholder(self, cell: _Cell, line: str) -> str:
        indent = line[:len(line) - len(line.lstrip(" \t"))]
        cell.magics.append(line.rstrip("\r\n"))
        return f"{indent}pass  # {self.token} magic {len(cell.magics) - 1}"

    def build(self) -> None:
        """Fill :attr:`source` and :attr:`origin`."""
        parts: list[str] = []
        for cell in self.cells:
            pieces = _EOL.split(cell.text)  # what the tokenizer calls a line, not splitlines()
            lines, ends = pieces[0::2], [*pieces[1::2], ""]
            if len(lines) > 1 and lines[-1] == "":
                lines, ends = lines[:-1], ends[:-1]
            ends[-1] = ends[-1] or "\n"  # put back off again when writing
            first = lines[0].lstrip()
            if first.startswith("%%"):
                name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
                if name not in PYTHON_CELL_MAGICS:
                    cell.skipped = True
                    continue
                lines[0] = self._placeholder(cell, lines[0])
            starts = _statement_starts(lines)
            for i, line in enumerate(lines):
                if not starts[i] or not _LINE_MAGIC.match(line) or line.lstrip().startswith(
                        f"pass  # {self.token}"):
                    continue
                m = _PY_LINE_MAGIC.match(line)
                if m and not m.group(3).endswith("\\"):
                    cell.prefixes.append(m.group(2))
                    self.shift[(cell.index + 1, i + 1)] = (len(m.group(1)), len(m.group(2)))
                    lines[i] = (f"{m.group(1)}{m.group(3)}  # {self.token} prefix "
                                f"{len(cell.prefixes) - 1}")
                else:
                    lines[i] = self._placeholder(cell, line)
            parts.append(self.marker(cell) + "\n")
            self.origin.append(None)
            for i, line in enumerate(lines):
                parts.append(line + ends[i])
                self.origin.append((cell.index + 1, i + 1))
        self.source = "".join(parts)

    def locate(self, line: int) -> tuple[int, int]:
        """``(cell, line in cell)`` of a line of :attr:`source`."""
        for i in range(max(line - 1, 0), len(self.origin)):
            where = self.origin[i]
            if where is not None:
                return where
        for where in reversed(self.origin):
            if where is not None:
                return where
        return (1, 1)

    def _col(self, cell: int, line: int, col: int) -> int:
        indent, prefix = self.shift.get((cell, line), (0, 0))
        return col + prefix if prefix and col >= indent else col

    def map(self, v: Violation) -> Violation:
        """A violation of :attr:`source` as one of the notebook (cell-relative)."""
        cell, line = self.locate(v.line)
        end_cell, end_line = self.locate(v.end_line)
        col = self._col(cell, line, v.col)
        end_col = self._col(end_cell, end_line, v.end_col)
        if end_cell != cell:
            end_line, end_col = line, col
        fix = v.fix
        if fix is not None:
            edits = []
            for e in fix.edits:
                (c1, l1), (c2, l2) = self.locate(e.line), self.locate(e.end_line)
                if c1 != cell or c2 != cell:
                    fix = None
                    break
                edits.append(Edit(l1, self._col(c1, l1, e.col), l2,
                                  self._col(c2, l2, e.end_col), e.text))
            else:
                fix = replace(fix, edits=tuple(edits))
        return replace(v, line=line, col=col, end_line=end_line, end_col=end_col, fix=fix,
                       cell=cell)

    def apply(self, fixed: str) -> tuple[str, list[tuple[int, str, str]]] | None:
        """The notebook JSON with ``fixed`` (a fixed :attr:`source`) put back.

        Returns:
            ``(json_text, [(cell, before, after), ...])`` or ``None`` when the fixed text
            no longer has the cell markers in order (then nothing must be written).
        """
        pattern = re.compile(rf"^# {re.escape(self.token)} cell (\d+)[ \t]*\r?$", re.MULTILINE)
        found = list(pattern.finditer(fixed))
        linted = [c for c in self.cells if not c.skipped]
        if [int(m.group(1)) for m in found] != [c.index + 1 for c in linted]:
            return None
        head = fixed[:found[0].start()] if found else ""
        placeholder = re.compile(rf"^([ \t]*)pass  # {re.escape(self.token)} magic (\d+)"
                                 r"[ \t]*(?=\r?$)", re.MULTILINE)
        prefixed = re.compile(rf"^([ \t]*)(.*?)  # {re.escape(self.token)} prefix (\d+)"
                              r"[ \t]*(?=\r?$)", re.MULTILINE)
        changes = []
        for k, (m, cell) in enumerate(zip(found, linted)):
            end = found[k + 1].start() if k + 1 < len(found) else len(fixed)
            body = fixed[m.end():end]
            body = body.removeprefix("\n")  # the marker's own newline
            if k == 0:
                body = head + body
            if (len(placeholder.findall(body)) != len(cell.magics)
                    or len(prefixed.findall(body)) != len(cell.prefixes)):
                return None  # a fix touched a magic: never lose one
            body = placeholder.sub(partial(_restore_magic, cell), body)
            body = prefixed.sub(partial(_restore_prefix, cell), body)
            if body.endswith("\n") and not cell.text.endswith("\n"):
                body = body[:-1]
            if body != cell.text:
                changes.append((cell.index + 1, cell.text, body))
                src = self.doc["cells"][cell.index]
                src["source"] = body.splitlines(keepends=True) if cell.is_list else body
        return _dump(self.doc, self.raw), changes


def _restore_magic(cell: _Cell, m: re.Match[str]) -> str:
    return m.group(1) + cell.magics[int(m.group(2))].lstrip(" \t")


def _restore_prefix(cell: _Cell, m: re.Match[str]) -> str:
    return m.group(1) + cell.prefixes[int(m.group(3))] + m.group(2)


def _dump(doc: dict[str, Any], raw: str) -> str:
    m = re.search(r"\n([ \t]+)\"", raw)
    indent: int | str | None = None
    if m:
        ws = m.group(1)
        indent = len(ws) if set(ws) == {" "} else ws
    ascii_only = raw.isascii() and "\\u" in raw
    separators = None
    if indent is None:  # one line: keep its spacing (quotes inside strings are escaped)
        key = re.search(r'^\s*\{\s*"(?:[^"\\]|\\.)*"(\s*:\s*)', raw)
        item = re.search(r'(?<!\\)"(\s*,\s*)"', raw)
        separators = (item.group(1) if item else ", ", key.group(1) if key else ": ")
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only, separators=separators)
    return text + "\n" if raw.endswith("\n") else text


def load_notebook(text: str, path: str) -> Notebook | Violation | None:
    """Parse notebook JSON; ``None`` for a notebook in another language.

    Returns:
        A built :class:`Notebook`, an ``E902`` diagnostic when this is not an nbformat 4
        notebook, or ``None`` when its kernel is not Python (nothing to lint).
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return io_error(path, f"not a Jupyter notebook: invalid JSON ({exc}); expected "
                              "nbformat 4 JSON")
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        fmt = doc.get("nbformat") if isinstance(doc, dict) else None
        got = f"nbformat {fmt}" if fmt is not None else "no 'cells' list"
        return io_error(path, f"not a Jupyter notebook this linter reads; expected "
                              f"nbformat 4 JSON, got {got}")
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    info, spec = meta.get("language_info"), meta.get("kernelspec")
    lang = info.get("name") if isinstance(info, dict) else None
    if lang is None and isinstance(spec, dict):
        lang = spec.get("language")
    if isinstance(lang, str) and lang.lower() not in ("python", "python3", "ipython"):
        return None
    cells = []
    for i, cell in enumerate(doc["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        if isinstance(src, list) and all(isinstance(s, str) for s in src):
            cells.append(_Cell(i, "".join(src), True))
        elif isinstance(src, str):
            cells.append(_Cell(i, src, False))
        else:
            return io_error(path, f"cell_{i + 1}: 'source' is neither a string nor a list "
                                  "of strings; expected nbformat 4 JSON")
    token, n = "torchmem-nb", 0
    while token in text:
        n += 1
        token = f"torchmem-nb{n}"
    nb = Notebook(path, doc, text, cells, token)
    nb.build()
    return nb


def _cell_diff(path: str, changes: list[tuple[int, str, str]]) -> str:
    out = []
    for cell, before, after in changes:
        name = f"{path}:cell_{cell}"
        for line in difflib.unified_diff(before.splitlines(keepends=True),
                                         after.splitlines(keepends=True),
                                         fromfile=f"a/{name}", tofile=f"b/{name}"):
            out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out)


def lint_notebook(data: bytes, path: str, opts: _Options, extra_ignore: tuple[str, ...] = ()
                  ) -> tuple[FileReport, SourceFile | None]:
    """Lint (and with ``opts.fix``/``opts.diff`` fix) a notebook's bytes; no writing.

    Returns:
        The report (positions cell-relative; ``fixed_text`` is the new notebook JSON) and
        the decoded file (``None`` when it could not be read as a notebook).
    """
    from torchmem.lint.files import FileReport, SourceFile, _lint_text

    encoding = "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        return FileReport(path, errors=[io_error(
            path, f"not valid UTF-8 at byte {exc.start}; expected notebook JSON in UTF-8")]), None
    nb = load_notebook(text, path)
    if isinstance(nb, Violation):
        return FileReport(path, errors=[nb]), None
    if nb is None or not nb.source:
        return FileReport(path), SourceFile(text, encoding)
    report = _lint_text(nb.source, path, opts, extra_ignore)
    lines = sum(1 for o in nb.origin if o is not None)
    violations = [nb.map(v) for v in report.violations]
    errors = [nb.map(e) for e in report.errors]
    if report.fixed_text is None:
        return FileReport(path, lines, violations, errors), SourceFile(text, encoding)
    applied = nb.apply(report.fixed_text)
    if applied is None:
        unfixed = _lint_text(nb.source, path, replace(opts, fix=False, diff=False),
                             extra_ignore)
        return FileReport(path, lines, [nb.map(v) for v in unfixed.violations], [
            *errors, io_error(path, "a fix moved code across notebook cells; the notebook "
                                    "was not changed (please report it)")]), None
    new_json, changes = applied
    diff = _cell_diff(path, changes) if opts.diff else ""
    return (FileReport(path, lines, violations, errors, fixed=report.fixed, diff=diff,
                       fixed_text=new_json if changes else None), SourceFile(text, encoding))
