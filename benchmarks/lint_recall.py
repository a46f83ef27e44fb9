"""Recall of ``torchmem lint`` on real fix commits: is the bug flagged before the fix, and gone after?

The corpus is ``benchmarks/lint_recall/`` by default (the rules were improved against its
commits), or ``benchmarks/lint_recall_holdout/`` with ``--corpus`` (commits from other
repositories, scored once, never tuned on): one directory per public commit that fixed a PyTorch
memory anti-pattern, holding ``before.py`` (the file at the parent commit) and ``after.py``
(the file at the fix commit), both small adapted excerpts with their source link, and
``commits.json`` describing each commit:

* ``fixed_lines``: lines of ``before.py`` holding the statements the fix changed;
* ``also_lines``: other lines of ``before.py`` where a finding also points at the bug (the
  forward passes inside a helper when the fix wrapped the helper's call in ``no_grad``);
* ``after_lines``: the lines of ``after.py`` holding the fixed statements (and the same
  helper lines);
* ``expected_rule``: the rule whose description covers the pattern, or ``null`` when none does;
* ``pattern``: a short label of the anti-pattern;
* ``context_files`` (optional, default none): other files of the commit's directory, as paths
  relative to it (``"utils/meters.py"``), kept where the buggy flow crosses files: excerpts of
  the modules ``before.py`` imports (at the parent commit, shared by before and after), placed
  where the import names them so that the linter finds them as it resolves imports. Each
  listed file must exist. Only ``before.py`` and ``after.py`` are linted; the context files are
  read through their imports, never scored on their own.

Later corpora, each scored once after it was committed and never tuned on before that:
``benchmarks/lint_recall_holdout2/`` and ``benchmarks/lint_recall_holdout3/`` (the first corpus
with ``context_files``).

Definitions (a line stands for the smallest statement containing it; for a compound statement
such as ``for``/``with``/``def`` only its header lines):

* **flagged**: ``before.py`` has a finding whose lines overlap a statement of ``fixed_lines``
  or ``also_lines``;
* **clean after the fix**: ``after.py`` has no finding *of a rule that flagged before.py* on a
  statement of ``after_lines`` (findings elsewhere in ``after.py`` do not count: the excerpts
  keep unrelated code of the real file, which may have its own problems);
* **caught** = flagged and clean after the fix. A commit that is flagged but still flagged
  after the fix is reported as ``flagged after fix`` and does not count as caught.
* **unchanged findings** are left out of both sides: a finding on the fixed statements of
  ``before.py`` that has the same rule and the same message as a finding on the fixed
  statements of ``after.py`` (one for one) is about code the fix did not change (another
  ``.item()`` call on the same line), so it neither flags the commit nor keeps it flagged.
  A message that names a line number differs when the fix shifted lines, and then counts
  as a changed finding on both sides (the conservative reading).

Recall of a rule = caught commits / commits whose ``expected_rule`` is that rule. Commits whose
pattern no rule covers (``expected_rule`` null) count in the overall recall only.

Usage:
    python benchmarks/lint_recall.py [--corpus DIR] [--select CODES] [--markdown]

It runs ``python -m torchmem lint --select ALL --format json --isolated --exit-zero`` once on
every before/after file (the real CLI, in a subprocess) and prints one table per commit, then
recall per expected rule and per pattern. ``--markdown`` prints Markdown tables for the docs.
Cost: one lint run over ~100 small files, a few seconds.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE / "lint_recall"
REQUIRED = ("id", "repo", "commit", "parent", "url", "path", "fixed_lines", "after_lines",
            "pattern", "expected_rule", "note")


class CorpusError(Exception):
    """The corpus is missing or malformed (printed as one line, exit code 2)."""


@dataclass
class Outcome:
    """What the linter said about one commit."""

    entry: dict
    before_codes: list[str] = field(default_factory=list)  # findings on the fixed statements
    after_codes: list[str] = field(default_factory=list)  # findings on them after the fix
    before_total: int = 0  # all findings in before.py
    after_total: int = 0  # all findings in after.py

    @property
    def flagged(self) -> bool:
        return bool(self.before_codes)

    @property
    def still_flagged(self) -> bool:
        return bool(set(self.before_codes) & set(self.after_codes))

    @property
    def caught(self) -> bool:
        return self.flagged and not self.still_flagged

    @property
    def status(self) -> str:
        if self.caught:
            return "caught"
        return "flagged after fix" if self.flagged else "missed"


def load_corpus(corpus: Path) -> list[dict]:
    """Read and check ``commits.json``; raise CorpusError with a one-line reason."""
    path = corpus / "commits.json"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(entries, list) or not entries:
        raise CorpusError(f"{path}: expected a non-empty JSON list of commits")
    for i, entry in enumerate(entries):
        missing = [k for k in REQUIRED if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise CorpusError(f"{path}: entry {i} lacks {', '.join(missing)}")
        for name in ("before.py", "after.py"):
            if not (corpus / entry["id"] / name).is_file():
                raise CorpusError(f"{corpus / entry['id'] / name}: no such file")
        check_context_files(corpus, path, i, entry)
    return entries


def check_context_files(corpus: Path, path: Path, i: int, entry: dict) -> None:
    """Check the optional ``context_files`` of one entry; raise CorpusError with a one-line reason.

    Each is a relative path (no ``..``) to a file of the commit's directory other than
    ``before.py``/``after.py``, and the file must exist.
    """
    context = entry.get("context_files", [])
    if not isinstance(context, list) or not all(isinstance(c, str) and c for c in context):
        raise CorpusError(f"{path}: entry {i}: context_files must be a list of relative paths")
    for rel in context:
        parts = Path(rel).parts
        if Path(rel).is_absolute() or "\\" in rel or ".." in parts:
            raise CorpusError(f"{path}: entry {i}: context file {rel!r} is not a relative path "
                              "inside the commit's directory")
        if rel in ("before.py", "after.py"):
            raise CorpusError(f"{path}: entry {i}: context file {rel!r} is the linted file itself")
        if not (corpus / entry["id"] / rel).is_file():
            raise CorpusError(f"{corpus / entry['id'] / rel}: no such file (listed in context_files)")


def statement_spans(source: str, lines: list[int]) -> list[tuple[int, int]]:
    """The (first, last) lines of the smallest statement containing each line.

    For a compound statement (``for``, ``with``, ``def``, ...) hit on its header, the span is
    the header only, so that a finding anywhere in its body does not count.
    """
    tree = ast.parse(source)
    spans = []
    for line in lines:
        best: tuple[int, int] | None = None
        for node in ast.walk(tree):
            if not isinstance(node, ast.stmt) or node.end_lineno is None:
                continue
            first, last = node.lineno, node.end_lineno
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                header_end = body[0].lineno - 1
                if first <= line <= header_end:
                    last = header_end
                elif line > header_end:
                    continue  # the line is in the body: a smaller statement holds it
            if first <= line <= last and (best is None or last - first <= best[1] - best[0]):
                best = (first, last)
        spans.append(best or (line, line))
    return spans


def run_lint(files: list[Path], select: str) -> dict[Path, list[dict]]:
    """Lint every file with the real CLI; return the JSON violations per resolved path.

    An empty ``select`` keeps the rules that are on by default."""
    cmd = [sys.executable, "-m", "torchmem", "lint", *(["--select", select] if select else []),
           "--format", "json",
           "--isolated", "--no-respect-gitignore", "--exit-zero", "-j", "1",
           *[str(f) for f in files]]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        reason = next((line for line in lines if "error:" in line), lines[-1])
        raise CorpusError(f"torchmem lint failed (exit {proc.returncode}): {reason}")
    report = json.loads(proc.stdout)
    if report.get("errors"):
        raise CorpusError(f"torchmem lint could not read a corpus file: {report['errors'][0]}")
    found: dict[Path, list[dict]] = defaultdict(list)
    for v in report["violations"]:
        found[Path(v["path"]).resolve()].append(v)
    return found


def _on(violations: list[dict], spans: list[tuple[int, int]]) -> list[dict]:
    """The violations whose lines overlap one of ``spans``."""
    return [v for v in violations
            if any(v["line"] <= last and v.get("end_line", v["line"]) >= first
                   for first, last in spans)]


def _changed(before: list[dict], after: list[dict]) -> tuple[list[str], list[str]]:
    """The rule codes of the findings on the fixed statements, before and after, less the
    findings that are identical on both sides (same rule, same message, paired one for one):
    those are about code the fix left as it was."""
    left = [(v["code"], v["message"]) for v in after]
    kept_before = []
    for v in before:
        key = (v["code"], v["message"])
        if key in left:
            left.remove(key)
        else:
            kept_before.append(v["code"])
    return sorted(set(kept_before)), sorted({code for code, _ in left})


def evaluate(corpus: Path, select: str = "ALL") -> list[Outcome]:
    """Lint the corpus and classify each commit."""
    entries = load_corpus(corpus)
    files = [(corpus / e["id"] / n).resolve() for e in entries for n in ("before.py", "after.py")]
    found = run_lint(files, select)
    outcomes = []
    for e in entries:
        before, after = (corpus / e["id"] / "before.py").resolve(), (corpus / e["id"] / "after.py").resolve()
        spans_b = statement_spans(before.read_text(encoding="utf-8"),
                                  list(e["fixed_lines"]) + list(e.get("also_lines", [])))
        spans_a = statement_spans(after.read_text(encoding="utf-8"), list(e["after_lines"]))
        codes_b, codes_a = _changed(_on(found[before], spans_b), _on(found[after], spans_a))
        outcomes.append(Outcome(e, codes_b, codes_a, len(found[before]), len(found[after])))
    return outcomes


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(header) + " |",
               "|" + "|".join("---" if i == 0 else "---:" if h in _NUMERIC else "---"
                              for i, h in enumerate(header)) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)),
                      *(fmt.format(*r) for r in rows)]).rstrip()


_NUMERIC = {"commits", "caught", "recall", "flagged after fix"}


def _pct(caught: int, n: int) -> str:
    return f"{caught}/{n} ({100 * caught / n:.0f}%)" if n else "-"


def render(outcomes: list[Outcome], markdown: bool = False) -> str:
    """Per-commit table, then recall per expected rule and per pattern."""
    link = (lambda o: f"[{o.entry['id']}]({o.entry['url']})") if markdown else (
        lambda o: o.entry["id"])
    rows = [[link(o), o.entry["pattern"], o.entry["expected_rule"] or "none",
             ",".join(o.before_codes) or "-", ",".join(o.after_codes) or "-", o.status]
            for o in outcomes]
    parts = [_table(["commit", "pattern", "expected rule", "before: at fix",
                     "after: at fix", "result"], rows, markdown)]

    def grouped(key: str, title: str) -> str:
        groups: dict[str, list[Outcome]] = defaultdict(list)
        for o in outcomes:
            groups[o.entry[key] or "none"].append(o)
        rows = [[name, str(len(g)), str(sum(o.caught for o in g)),
                 str(sum(o.status == "flagged after fix" for o in g)),
                 _pct(sum(o.caught for o in g), len(g))]
                for name, g in sorted(groups.items())]
        return _table([title, "commits", "caught", "flagged after fix", "recall"], rows, markdown)

    parts.append(grouped("expected_rule", "expected rule"))
    parts.append(grouped("pattern", "pattern"))
    caught = sum(o.caught for o in outcomes)
    parts.append(f"Overall recall: {_pct(caught, len(outcomes))} of {len(outcomes)} commits "
                 f"from {len({o.entry['repo'] for o in outcomes})} repositories.")
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="corpus directory")
    ap.add_argument("--select", default="ALL", help="rule selection passed to torchmem lint")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = ap.parse_args(argv)
    try:
        outcomes = evaluate(Path(args.corpus), args.select)
    except CorpusError as exc:
        print(f"lint_recall: error: {exc}", file=sys.stderr)
        return 2
    print(render(outcomes, markdown=args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
