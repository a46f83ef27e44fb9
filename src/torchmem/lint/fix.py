"""Apply the rules' fixes to source text: exact-range edits, to a fixed point.

Each :class:`~torchmem.lint.violation.Fix` is a set of text edits computed from ``ast``
positions, so everything outside the edited ranges (comments, blank lines, quoting,
line endings) is kept byte for byte, as in ruff. :func:`fix_source` lints, applies every
applicable fix whose edits do not overlap an already chosen one, checks that the result
still parses, and lints again until nothing changes (at most ``max_rounds`` rounds). A
batch of fixes that breaks the syntax is retried one fix at a time, and a fix that still
breaks it is dropped; the original text is never replaced by something that does not
parse. Running it again on its own output changes nothing.

Example:
    >>> from torchmem.lint.violation import Edit
    >>> apply_edits("y = x.data  # keep\\n", [Edit(1, 6, 1, 10, "detach()")])
    'y = x.detach()  # keep\\n'

Known limitations:
    Fixes are text edits, not syntax-tree rewrites: a rule that needs structural changes
    offers no fix (it is reported only). Stubs, notebooks and files that do not parse are
    never changed.
"""

from __future__ import annotations

import ast
import difflib
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from torchmem.lint.violation import Edit, Fix, Violation

__all__ = [
    "FixOutcome",
    "applicable",
    "apply_edits",
    "fix_source",
    "line_offsets",
    "unified_diff",
]

_EOL = re.compile(r"\r\n|\r|\n")


def line_offsets(text: str) -> list[int]:
    """Character offset of the start of each line (index 0 is line 1).

    Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` exactly as Python's tokenizer counts them
    (unlike :meth:`str.splitlines`, which also splits on form feeds and other separators).
    """
    offsets = [0]
    offsets.extend(m.end() for m in _EOL.finditer(text))
    return offsets


def _offset(offsets: list[int], text: str, line: int, col: int) -> int:
    if line < 1:
        raise ValueError(f"edit line must be >= 1; got {line}")
    if line > len(offsets):  # one past the last line: end of text
        return len(text)
    return min(offsets[line - 1] + col, len(text))


def _newline(text: str) -> str:
    m = _EOL.search(text)
    return m.group(0) if m else "\n"


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Return ``text`` with non-overlapping ``edits`` applied.

    Inserted text that contains ``\\n`` is converted to the file's own line ending.

    Raises:
        ValueError: two edits overlap, or an edit ends before it starts.
    """
    offsets = line_offsets(text)
    newline = _newline(text)
    spans = []
    for e in edits:
        start = _offset(offsets, text, e.line, e.col)
        end = _offset(offsets, text, e.end_line, e.end_col)
        if end < start:
            raise ValueError(f"edit ends before it starts: {e}")
        body = e.text.replace("\n", newline) if newline != "\n" else e.text
        spans.append((start, end, body))
    spans.sort(key=lambda s: (s[0], s[1]))
    for (s1, e1, _), (s2, e2, _) in zip(spans, spans[1:]):
        if s2 < e1 or (s2 == s1 and e2 == e1 and s1 != e1):
            raise ValueError("overlapping edits")
    out, pos = [], 0
    for start, end, body in spans:
        out.append(text[pos:start])
        out.append(body)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def applicable(violations: Iterable[Violation], *, unsafe: bool = False) -> list[Fix]:
    """The fixes of ``violations`` allowed at this safety level, in source order."""
    fixes = [v.fix for v in sorted(violations, key=Violation.sort_key)
             if v.fix is not None and v.fix.edits and (unsafe or v.fix.safety == "safe")]
    return fixes


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _span_keys(text: str, fix: Fix) -> list[tuple[int, int]]:
    offsets = line_offsets(text)
    return [(_offset(offsets, text, e.line, e.col), _offset(offsets, text, e.end_line, e.end_col))
            for e in fix.edits]


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    if a[0] == a[1] or b[0] == b[1]:  # insertions conflict only at the same point/inside
        return a[0] < b[1] and b[0] < a[1] or a[0] == b[0]
    return a[0] < b[1] and b[0] < a[1]


def _choose(text: str, fixes: Sequence[Fix]) -> list[Fix]:
    chosen: list[Fix] = []
    taken: list[tuple[int, int]] = []
    seen_edits: set[tuple[Edit, ...]] = set()
    for fix in fixes:
        if fix.edits in seen_edits:  # two violations offering the very same change
            continue
        spans = _span_keys(text, fix)
        if any(_overlaps(s, t) for s in spans for t in taken):
            continue
        try:
            apply_edits(text, fix.edits)
        except ValueError:
            continue
        chosen.append(fix)
        seen_edits.add(fix.edits)
        taken.extend(spans)
    return chosen


@dataclass(frozen=True)
class FixOutcome:
    """What :func:`fix_source` did.

    Attributes:
        text: the fixed text (the input itself when nothing applied).
        applied: number of fixes applied in total.
        violations: what the last lint of ``text`` found (the remaining violations).
        rounds: lint/fix rounds run.
    """

    text: str
    applied: int
    violations: list[Violation]
    rounds: int


def fix_source(text: str, lint: Callable[[str], list[Violation]], *, unsafe: bool = False,
               max_rounds: int = 10) -> FixOutcome:
    """Fix ``text`` to a fixed point.

    Args:
        text: source text (any line endings).
        lint: the linter to use, ``text -> violations`` (may raise on a syntax error; then
            nothing is changed and the error propagates).
        unsafe: apply ``"unsafe"`` fixes too.
        max_rounds: stop after this many lint/fix rounds.

    Returns:
        A :class:`FixOutcome`. Its text parses whenever the input did.
    """
    applied = 0
    violations = lint(text)
    rounds = 1
    while rounds <= max_rounds:
        fixes = _choose(text, applicable(violations, unsafe=unsafe))
        if not fixes:
            break
        candidate = apply_edits(text, [e for f in fixes for e in f.edits])
        count = len(fixes)
        if not _parses(candidate):
            # some fix breaks the syntax: apply the first one that does not, then relint
            # (the other fixes' positions refer to the old text)
            candidate, count = text, 0
            for fix in fixes:
                trial = apply_edits(text, fix.edits)
                if _parses(trial):
                    candidate, count = trial, 1
                    break
        if count == 0 or candidate == text:
            break
        text, applied = candidate, applied + count
        violations = lint(text)
        rounds += 1
    return FixOutcome(text=text, applied=applied, violations=violations, rounds=rounds)


def unified_diff(before: str, after: str, path: str) -> str:
    """A ``git diff``-style unified diff of ``before`` -> ``after`` for ``path``."""
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    lines = list(difflib.unified_diff(a, b, fromfile=f"a/{path}", tofile=f"b/{path}"))
    out = []
    for line in lines:
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)
