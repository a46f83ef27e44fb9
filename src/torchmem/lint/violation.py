"""What the linter reports: violations, their fixes, and the syntax-error diagnostic.

These are plain frozen records (no torch). Positions follow one convention everywhere:
lines are 1-based, columns are 0-based *character* offsets into the line (``ast`` gives
UTF-8 byte offsets; the engine converts them). Text output prints ``col + 1``.

Example:
    >>> from torchmem.lint import lint_source
    >>> [v.code for v in lint_source("import torch\\nx = torch.ones(2)\\ny = x.data\\n", select="ALL")]
    ['TMM401']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torchmem.errors import InputError
from torchmem.model._serde import Record

__all__ = ["Edit", "Fix", "Violation", "LintSyntaxError", "FixSafety"]

FixSafety = Literal["safe", "unsafe"]


@dataclass(frozen=True)
class Edit(Record):
    """Replace the text between two positions with ``text``.

    An insertion has ``(line, col) == (end_line, end_col)``; a deletion has ``text == ""``.

    Attributes:
        line: first line of the replaced range (1-based).
        col: first character of the range (0-based, characters not bytes).
        end_line: last line of the range (1-based).
        end_col: character just after the range (0-based, exclusive).
        text: the replacement text.
    """

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True)
class Fix(Record):
    """A machine-applicable change that resolves one violation.

    Attributes:
        title: imperative one-line description (``"Call .detach() instead of .data"``).
        safety: ``"safe"`` when the change cannot alter behaviour beyond the rule's stated
            intent; ``"unsafe"`` when it may (applied only with ``--unsafe-fixes``).
        edits: non-overlapping text edits, all applied together or not at all.
    """

    title: str
    safety: FixSafety
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Violation(Record):
    """One finding of one rule at one place in one file.

    Attributes:
        path: the file as the user named it (``"<string>"`` for :func:`lint_source`).
        line: 1-based line of the start of the offending code.
        col: 0-based character column of the start (printed as ``col + 1``).
        end_line: 1-based line where the offending code ends.
        end_col: 0-based character column just after the offending code.
        code: rule code, e.g. ``"TMM101"``.
        name: the rule's kebab-case name, e.g. ``"graph-accumulation"``.
        message: factual description of what was found at this place.
        fix: an optional fix; see :class:`Fix`.
        cell: for a Jupyter notebook, the 1-based cell (counting every cell) that
            ``line``/``col`` and the fix's edits are relative to; ``None`` for a ``.py``.
    """

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    code: str
    name: str
    message: str
    fix: Fix | None = None
    cell: int | None = None

    def sort_key(self) -> tuple[str, int, int, int, str]:
        """Key that orders violations by file, (notebook cell,) position, then code."""
        return (self.path, self.cell or 0, self.line, self.col, self.code)


class LintSyntaxError(InputError):
    """The linted text is not valid Python (or cannot be parsed at all).

    Attributes:
        path: the file (or ``"<string>"``).
        line: 1-based line of the error (1 when unknown).
        col: 0-based character column of the error (0 when unknown).
    """

    def __init__(self, message: str, *, path: str = "<string>", line: int = 1,
                 col: int = 0, tip: str | None = None) -> None:
        super().__init__(message, tip=tip)
        self.path = path
        self.line = line
        self.col = col
