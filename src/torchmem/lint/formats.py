"""Render lint results as text (ruff-like), JSON or SARIF 2.1.0; explain a rule.

Functions return strings; the CLI writes them. Columns are printed 1-based.

Example:
    >>> from torchmem.lint.violation import Violation
    >>> v = Violation("t.py", 3, 4, 3, 10, "TMM401", "tensor-data", "`.data` bypasses autograd")
    >>> format_violation(v)
    't.py:3:5: TMM401 `.data` bypasses autograd'
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from torchmem.lint.files import LintResult
from torchmem.lint.violation import Violation

__all__ = [
    "JSON_SCHEMA_VERSION",
    "SARIF_SCHEMA",
    "format_explain",
    "format_json",
    "format_rule_list",
    "format_sarif",
    "format_statistics",
    "format_text",
    "format_violation",
]

JSON_SCHEMA_VERSION = 1
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_DOCS_URL = "https://github.com/torchmem/torchmem/blob/main/docs/lint.md"

_BOLD, _RED, _CYAN, _DIM, _RESET = "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[2m", "\x1b[0m"


def _paint(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color else text


def format_violation(v: Violation, *, color: bool = False, show_fix: bool = False) -> str:
    """One line: ``path:line:col: CODE message`` (plus ``[*]`` when a fix exists)."""
    cell = f":cell_{v.cell}" if v.cell else ""
    where = _paint(v.path, _BOLD, color) + f"{cell}:{v.line}:{v.col + 1}:"
    code = _paint(v.code, _RED + _BOLD, color)
    mark = ""
    if v.fix is not None:
        mark = " [*]" if v.fix.safety == "safe" else (" [unsafe fix]" if show_fix else "")
    return f"{where} {code}{mark} {v.message}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_text(result: LintResult, *, color: bool = False, show_fixes: bool = True,
                fix_mode: bool = False) -> str:
    """Violations and per-file errors, one per line, then a summary.

    Args:
        result: what :func:`~torchmem.lint.files.lint_paths` returned.
        color: ANSI colors (the CLI turns them on only on a terminal).
        show_fixes: mention how many violations ``--fix`` / ``--unsafe-fixes`` can fix.
        fix_mode: the run applied fixes (the summary says how many).
    """
    items = sorted([*result.violations, *result.errors], key=Violation.sort_key)
    lines = [format_violation(v, color=color) for v in items]
    n_found = len(result.violations)
    summary = []
    if fix_mode and result.fixed:
        summary.append(f"Fixed {_plural(result.fixed, 'violation')} in "
                       f"{_plural(len(result.fixed_files), 'file')}.")
    if n_found:
        remaining = " remaining" if fix_mode and result.fixed else ""
        summary.append(f"Found {_plural(n_found, 'violation')}{remaining} in "
                       f"{_plural(len({v.path for v in result.violations}), 'file')} "
                       f"({_plural(result.files, 'file')}, {result.lines:,} lines checked).")
        safe = sum(1 for v in result.violations if v.fix and v.fix.safety == "safe")
        unsafe = sum(1 for v in result.violations if v.fix and v.fix.safety == "unsafe")
        if show_fixes and not fix_mode and (safe or unsafe):
            hint = []
            if safe:
                hint.append(f"[*] {safe} fixable with --fix")
            if unsafe:
                hint.append(f"{unsafe} more with --fix --unsafe-fixes")
            summary.append("; ".join(hint) + " (preview with --diff).")
    elif not result.errors:
        summary.append(_paint("All checks passed!", _BOLD, color) +
                       f" ({_plural(result.files, 'file')}, {result.lines:,} lines)")
    if result.errors:
        summary.append(f"{_plural(len(result.errors), 'file')} could not be linted "
                       "(E902: unreadable, E999: syntax error, TMM000: internal error).")
    if lines:
        lines.append("")
    return "\n".join(lines + summary)


def _violation_dict(v: Violation) -> dict[str, Any]:
    d = v.to_dict()
    d["column"] = v.col + 1  # 1-based, as printed
    d["end_column"] = v.end_col + 1
    return d


def format_json(result: LintResult) -> str:
    """A JSON document with ``schema_version``, counts, violations and errors.

    Positions keep the record convention (``col`` 0-based) and add 1-based ``column`` /
    ``end_column`` as printed in text output.
    """
    doc = {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": "torchmem lint",
        "summary": {"files": result.files, "lines": result.lines,
                    "violations": len(result.violations), "errors": len(result.errors),
                    "fixed": result.fixed},
        "violations": [_violation_dict(v) for v in result.violations],
        "errors": [_violation_dict(v) for v in result.errors],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


def _rule_descriptor(code: str) -> dict[str, Any]:
    from torchmem.lint.registry import RULES

    rule = RULES.get(code)
    if rule is None:  # E902 / E999 / TMM000
        names = {"E902": ("io-error", "The file could not be read or decoded."),
                 "E999": ("syntax-error", "The file is not valid Python."),
                 "TMM000": ("internal-error", "torchmem failed on this file.")}
        name, text = names.get(code, ("unknown", code))
        return {"id": code, "name": name, "shortDescription": {"text": text},
                "defaultConfiguration": {"level": "error"}}
    sections = rule.doc_sections()
    full = sections.get("What") or rule.summary
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": full},
        "help": {"text": format_explain(rule.code), "markdown": format_explain(rule.code)},
        "helpUri": _DOCS_URL,
        "defaultConfiguration": {"level": "warning"},
        "properties": {"tags": ["pytorch", "memory"],
                       "fixSafety": rule.fix_safety or "none"},
    }


def _uri(path: str) -> str:
    from urllib.parse import quote

    return quote(path.replace("\\", "/"))


def format_sarif(result: LintResult, *, version: str | None = None) -> str:
    """A SARIF 2.1.0 log (one run) for code-scanning UIs (GitHub, VS Code SARIF viewer).

    Columns are Unicode code points (``columnKind``), 1-based; paths are relative URIs
    as the user named them. Fixes become SARIF ``fixes`` with ``artifactChanges``.
    """
    if version is None:
        from torchmem import __version__ as version
    items = sorted([*result.violations, *result.errors], key=Violation.sort_key)
    codes = sorted({v.code for v in items})
    index = {c: i for i, c in enumerate(codes)}
    results = []
    for v in items:
        region = {"startLine": v.line, "startColumn": v.col + 1,
                  "endLine": max(v.end_line, v.line),
                  "endColumn": v.end_col + 1 if v.end_line > v.line or v.end_col > v.col
                  else v.col + 2}
        res: dict[str, Any] = {
            "ruleId": v.code,
            "ruleIndex": index[v.code],
            "level": "error" if v in result.errors else "warning",
            "message": {"text": v.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(v.path), "uriBaseId": "%SRCROOT%"},
                "region": region}}],
        }
        if v.cell:  # notebook: positions are relative to the cell, not the JSON file
            res["message"]["text"] = f"cell_{v.cell}: {v.message}"
            res["properties"] = {"cell": v.cell}
        if v.fix is not None and not v.cell:
            res["fixes"] = [{
                "description": {"text": v.fix.title},
                "artifactChanges": [{
                    "artifactLocation": {"uri": _uri(v.path), "uriBaseId": "%SRCROOT%"},
                    "replacements": [{
                        "deletedRegion": {"startLine": e.line, "startColumn": e.col + 1,
                                          "endLine": e.end_line, "endColumn": e.end_col + 1},
                        "insertedContent": {"text": e.text}} for e in v.fix.edits],
                }],
            }]
        results.append(res)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "torchmem",
                "version": version,
                "informationUri": _DOCS_URL,
                "rules": [_rule_descriptor(c) for c in codes],
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2, ensure_ascii=False)


def format_statistics(violations: Iterable[Violation], *, unsafe: bool = False) -> str:
    """A table: count, code, fixability, name, most frequent first.

    ``[*]`` marks a rule with at least one violation that ``--fix`` fixes (a safe fix);
    ``[-]`` one whose fixes are all unsafe (applied only with ``--unsafe-fixes``, and
    worth reviewing). ``unsafe`` is accepted for compatibility and changes nothing: an
    unsafe fix stays marked as one.
    """
    violations = list(violations)
    counts = Counter((v.code, v.name) for v in violations)
    safe = {v.code for v in violations if v.fix is not None and v.fix.safety == "safe"}
    unsafe_only = {v.code for v in violations if v.fix is not None} - safe
    if not counts:
        return ""
    width = len(str(max(counts.values())))

    def mark(code: str) -> str:
        return "[*]" if code in safe else ("[-]" if code in unsafe_only else "   ")

    rows = [f"{n:>{width}}  {code:<7} {mark(code)} {name}"
            for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(rows)


def format_explain(code: str) -> str:
    """The rule's full documentation as Markdown (``torchmem lint --explain CODE``).

    Raises:
        UsageError: no rule has this code or name.
    """
    from torchmem.errors import UsageError
    from torchmem.lint.registry import DOC_SECTIONS, RULES

    rule = RULES.get(code.upper()) or next(
        (r for r in RULES.values() if r.name == code.lower()), None)
    if rule is None:
        raise UsageError(f"--explain: unknown rule {code!r}; expected a code such as TMM101",
                         tip="run 'torchmem lint --explain ALL' to list the rules")
    sections = rule.doc_sections()
    out = [f"# {rule.code} {rule.name}", ""]
    head = sections.get("", "").strip()
    if head:
        out += [head, ""]
    fix = (f"{rule.fix_title} ({rule.fix_safety} fix)" if rule.fix_title
           else "none (reported only)")
    out += [f"Fix: {fix}.  Enabled by default: {'yes' if rule.default_enabled else 'no'}.", ""]
    for name in DOC_SECTIONS:
        body = sections.get(name, "").strip()
        if body:
            out += [f"## {name}", "", body, ""]
    return "\n".join(out).rstrip() + "\n"


def format_rule_list() -> str:
    """One line per rule: code, name, default on/off, fix, summary."""
    from torchmem.lint.registry import RULES

    rows = []
    for code in sorted(RULES):
        r = RULES[code]
        flags = ("on " if r.default_enabled else "off") + (
            " fix" if r.fix_safety == "safe" else " fix*" if r.fix_safety else "     ")
        rows.append(f"{code}  {r.name:<32} {flags:<9} {r.summary}")
    return "\n".join(rows) + "\n(on/off: enabled by default; fix: safe fix, fix*: unsafe fix)"
