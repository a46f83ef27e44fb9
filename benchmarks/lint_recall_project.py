"""Recall of ``torchmem lint`` on real fix commits, linted in the whole project at each commit.

``benchmarks/lint_recall.py`` scores small excerpts of each fix commit's file. A user lints the
whole project, where the linter's project-wide analysis (imported modules, summaries of
helpers, callers) sees the other files. This script measures the same commits that way:

* the ``.py`` files of the parent commit's tree and of the fix commit's tree are extracted
  from a git repository (a bare mirror or a checkout) into two temporary directories (blobs
  that the repository lacks, as in snapshots without their largest files, are skipped and
  counted);
* the lines the fix changed come from the real diff (``git diff -U0 PARENT COMMIT -- PATH``):
  its removed lines on the parent side, its added lines on the fix side; where a hunk
  removes or adds nothing on one side (a pure insertion or deletion), the two lines around
  the place where it happened stand for it on that side;
* the entry's ``fixed_lines`` and ``also_lines`` (lines of the excerpt ``before.py`` where
  the bug is: the forward pass when the fix added ``@torch.no_grad()`` above its ``def``,
  the forward passes inside a helper whose call the fix wrapped in ``no_grad``) and
  ``after_lines`` are carried into the real files by their text: each goes
  to the line of the same text (stripped) nearest to where the excerpt's ``(lines A-B
  omitted)`` markers place it; a line whose text the real file lacks is counted, not used;
* the real CLI lints each whole tree once (``python -m torchmem lint --select ALL --format
  json --isolated --exit-zero --no-respect-gitignore -j 1 DIR``) and only the findings in
  the commit's ``path`` count, on the statements holding the changed lines (widened as
  ``lint_recall.statement_spans`` does);
* the classification is ``lint_recall``'s, through its own functions: findings identical
  on both sides (same rule and message, one for one) are left out, then **caught** = a
  finding on the changed statements before the fix and none of the same rule after it;
  **flagged after fix**; **missed**. A commit whose repository or commits cannot be read
  is kept as **no checkout**, one where the CLI exits with an error as **lint failed**;
  a fixed file that the linter cannot read (``E902``, ``E999``) is scored (missed) and
  counted as **file not linted**.

Each commit is also scored on its excerpts with ``lint_recall.evaluate`` so that the
table shows which commits the whole project changes.

Repositories: ``--mirrors`` is either a JSON file mapping ``"owner/name"`` to a git
directory, or a directory holding one repository per ``owner/name``, as
``DIR/owner+name`` (a bare repository, a checkout, or a folder with either under
``repo/``), ``DIR/owner/name`` or ``DIR/name``. A bare mirror is made with
``git clone --bare https://github.com/owner/name DIR/owner+name``. Fetched code is read
only from there; none of it belongs in this repository.

Usage:
    python benchmarks/lint_recall_project.py --mirrors DIR_OR_JSON [--corpus DIR ...]
        [--only ID,ID] [--select CODES] [--markdown] [--json OUT] [--diff-lines-only]

Cost: two lint runs of each whole project per commit: the 132 commits of the five
development corpora (3.0M lines at their parent commits) take about five minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lint_recall import (  # noqa: E402  (sibling scripts, not a package)
    DEFAULT_CORPUS,
    CorpusError,
    Outcome,
    _changed,
    _on,
    _pct,
    _table,
    evaluate,
    load_corpus,
    statement_spans,
)
from lint_recall_checkout import (  # noqa: E402
    NoCheckout,
    changed_lines,
    extract_tree,
    find_git_dir,
)

_OMITTED = re.compile(r"\(lines (\d+)-(\d+) omitted\)")


def excerpt_position(excerpt: list[str], line: int) -> int:
    """Where ``line`` of an excerpt stood in the real file, from the excerpt's
    ``(lines A-B omitted)`` markers: B + distance after the previous marker, else A - distance
    before the next one (the line itself when the excerpt has no marker)."""
    marks = [(i + 1, int(m[1]), int(m[2])) for i, t in enumerate(excerpt)
             if (m := _OMITTED.search(t))]
    before = [(k, last) for k, _, last in marks if k < line]
    if before:
        k, last = before[-1]
        return last + line - k
    after = [(k, first) for k, first, _ in marks if k > line]
    return after[0][1] - (after[0][0] - line) if after else line


def map_excerpt_lines(excerpt: str, lines: list[int], real: str) -> tuple[list[int], int]:
    """Lines of the real file holding ``lines`` of the excerpt, and how many were not found.

    Each goes to the line of the same text (stripped) nearest to its position from the
    excerpt's omission markers."""
    ex, rl = excerpt.splitlines(), real.splitlines()
    mapped, unmapped = set(), 0
    for line in lines:
        text = ex[line - 1].strip() if 0 < line <= len(ex) else ""
        hits = [i + 1 for i, t in enumerate(rl) if text and t.strip() == text]
        if hits:
            guess = excerpt_position(ex, line)
            mapped.add(min(hits, key=lambda i: (abs(i - guess), i)))
        else:
            unmapped += 1
    return sorted(mapped), unmapped


@dataclass
class LintRun:
    """One run of the CLI over a whole project."""

    found: dict[Path, list[dict]]
    errors: list[dict]
    files: int
    lines: int
    seconds: float


def lint_project(root: Path, select: str) -> LintRun:
    """Lint every file under ``root`` with the real CLI (a subprocess)."""
    cmd = [sys.executable, "-m", "torchmem", "lint", "--select", select, "--format", "json",
           "--isolated", "--exit-zero", "--no-respect-gitignore", "-j", "1", str(root)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        raise CorpusError(f"torchmem lint failed (exit {proc.returncode}): {lines[-1]}")
    report = json.loads(proc.stdout)
    found: dict[Path, list[dict]] = defaultdict(list)
    for v in report["violations"]:
        found[Path(v["path"]).resolve()].append(v)
    return LintRun(found, report["errors"], report["summary"]["files"],
                   report["summary"]["lines"], seconds)


def _spans(source: str, lines: list[int]) -> list[tuple[int, int]]:
    try:
        return statement_spans(source, lines)
    except (SyntaxError, ValueError):  # the linter reports the file as E999
        return [(line, line) for line in lines]


@dataclass
class ProjectOutcome:
    """What the linter said about one commit in its whole project."""

    entry: dict
    corpus: str
    outcome: Outcome | None = None  # None: no checkout
    reason: str = ""  # why there is no checkout, or why the linter failed
    lint_failed: bool = False  # the CLI itself exited with an error (a linter bug)
    files: int = 0  # files linted at the parent commit
    lines: int = 0  # lines linted at the parent commit
    missing_blobs: int = 0  # .py blobs absent from the repository, both commits
    seconds: float = 0.0  # both lint runs
    changed: tuple[int, int] = (0, 0)  # changed lines of path: parent side, fix side
    carried: tuple[int, int] = (0, 0)  # excerpt lines carried into the files, and not found
    linter_errors: Counter = field(default_factory=Counter)  # E902/E999/TMM000, both runs
    path_errors: list[str] = field(default_factory=list)  # those in the fixed file
    excerpt: str = "-"  # lint_recall's result on the excerpts

    @property
    def status(self) -> str:
        if self.lint_failed:
            return "lint failed"
        return self.outcome.status if self.outcome else "no checkout"


def carry_excerpt_lines(entry: dict, excerpts: Path | None, src_b: str, src_a: str
                        ) -> tuple[list[int], list[int], tuple[int, int]]:
    """The ``fixed_lines``, ``also_lines`` and ``after_lines`` of the entry carried into the
    real files (``excerpts``: the commit's corpus directory, or None for none), and
    (carried, not found)."""
    if excerpts is None or not (excerpts / "before.py").is_file():
        return [], [], (0, 0)
    ex_b = (excerpts / "before.py").read_text(encoding="utf-8")
    ex_a = (excerpts / "after.py").read_text(encoding="utf-8")
    also = list(entry["fixed_lines"]) + list(entry.get("also_lines", []))
    after = list(entry["after_lines"])
    more_b, lost_b = map_excerpt_lines(ex_b, also, src_b)
    more_a, lost_a = map_excerpt_lines(ex_a, after, src_a)
    return more_b, more_a, (len(also) + len(after) - lost_b - lost_a, lost_b + lost_a)


def evaluate_commit(entry: dict, git_dir: Path | None, select: str = "ALL",
                    corpus: str = "", excerpts: Path | None = None) -> ProjectOutcome:
    """Lint the parent's and the fix's whole trees and classify the commit.

    ``excerpts``: the commit's directory in its corpus, whose ``fixed_lines``,
    ``also_lines`` and ``after_lines`` are carried into the real files; None to score the
    diff's lines only."""
    result = ProjectOutcome(entry, corpus)
    if git_dir is None:
        result.reason = "no repository"
        return result
    try:
        with tempfile.TemporaryDirectory(prefix="lint-recall-project-") as tmp:
            before = extract_tree(git_dir, entry["parent"], Path(tmp, "before"))
            after = extract_tree(git_dir, entry["commit"], Path(tmp, "after"))
            result.missing_blobs = before.missing_blobs + after.missing_blobs
            file_b, file_a = (before.root / entry["path"]), (after.root / entry["path"])
            if not file_b.is_file() or not file_a.is_file():
                raise NoCheckout(f"{entry['path']} absent at a commit")
            src_b = file_b.read_text(encoding="utf-8", errors="replace")
            src_a = file_a.read_text(encoding="utf-8", errors="replace")
            lines_b, lines_a = changed_lines(git_dir, entry["parent"], entry["commit"],
                                             entry["path"], len(src_b.splitlines()),
                                             len(src_a.splitlines()))
            result.changed = (len(lines_b), len(lines_a))
            more_b, more_a, result.carried = carry_excerpt_lines(entry, excerpts, src_b, src_a)
            lines_b, lines_a = sorted({*lines_b, *more_b}), sorted({*lines_a, *more_a})
            runs = [lint_project(before.root, select), lint_project(after.root, select)]
            result.files, result.lines = runs[0].files, runs[0].lines
            result.seconds = sum(r.seconds for r in runs)
            for run, path in zip(runs, (file_b, file_a)):
                result.linter_errors.update(e["code"] for e in run.errors)
                result.path_errors += [f"{e['code']} {e['message']}" for e in run.errors
                                       if Path(e["path"]).resolve() == path.resolve()]
            found_b, found_a = runs[0].found[file_b.resolve()], runs[1].found[file_a.resolve()]
            codes_b, codes_a = _changed(_on(found_b, _spans(src_b, lines_b)),
                                        _on(found_a, _spans(src_a, lines_a)))
            result.outcome = Outcome(entry, codes_b, codes_a, len(found_b), len(found_a))
    except NoCheckout as exc:
        result.reason = str(exc)
    except CorpusError as exc:  # the CLI crashed on this project: kept, marked
        result.reason, result.lint_failed = str(exc), True
    return result


def evaluate_corpora(corpora: list[Path], mirrors: Path, select: str = "ALL",
                     only: set[str] | None = None, progress=None,
                     carry: bool = True) -> list[ProjectOutcome]:
    """Every commit of every corpus (or those of ``only``), in the project and in excerpts;
    ``carry=False`` scores the diff's lines only."""
    results = []
    for corpus in corpora:
        excerpt = {o.entry["id"]: o.status for o in evaluate(corpus, select)}
        for entry in load_corpus(corpus):
            if only is not None and entry["id"] not in only:
                continue
            result = evaluate_commit(entry, find_git_dir(entry["repo"], mirrors), select,
                                     corpus.name, corpus / entry["id"] if carry else None)
            result.excerpt = excerpt[entry["id"]]
            results.append(result)
            if progress:
                progress(result)
    return results


def _line(r: ProjectOutcome) -> str:
    o = r.outcome
    return (f"{r.corpus}/{r.entry['id']}: {r.status} (excerpt: {r.excerpt})"
            + (f" before={','.join(o.before_codes) or '-'} after={','.join(o.after_codes) or '-'}"
               f" {r.files} files {r.lines} lines {r.seconds:.1f}s" if o else f" [{r.reason}]"))


def render(results: list[ProjectOutcome], markdown: bool = False) -> str:
    """Per-commit table, per-corpus and per-rule summaries, then the commits the whole
    project changes."""
    link = (lambda r: f"[{r.entry['id']}]({r.entry['url']})") if markdown else (
        lambda r: r.entry["id"])
    rows = []
    for r in results:
        o = r.outcome
        rows.append([link(r), r.corpus, r.entry["expected_rule"] or "none",
                     ",".join(o.before_codes) or "-" if o else "-",
                     ",".join(o.after_codes) or "-" if o else "-",
                     r.status if o else f"{r.status} ({r.reason})", r.excerpt,
                     str(r.files), str(r.lines), f"{r.changed[0]}/{r.changed[1]}",
                     f"{r.carried[0]}/{r.carried[0] + r.carried[1]}",
                     str(r.missing_blobs), f"{r.seconds:.1f}",
                     ", ".join(r.path_errors) or "-"])
    parts = [_table(["commit", "corpus", "expected rule", "before: at fix", "after: at fix",
                     "project", "excerpt", "files", "lines", "changed -/+", "carried",
                     "missing blobs",
                     "lint s", "linter errors in the file"], rows, markdown)]
    groups: dict[str, list[ProjectOutcome]] = defaultdict(list)
    for r in results:
        groups[r.corpus].append(r)
    summary = []
    for name, g in list(groups.items()) + ([("all", results)] if len(groups) > 1 else []):
        count = Counter(r.status for r in g)
        summary.append([name, str(len(g)), _pct(count["caught"], len(g)),
                        str(count["flagged after fix"]), str(count["missed"]),
                        str(count["no checkout"] + count["lint failed"]),
                        str(sum(bool(r.path_errors) for r in g)),
                        _pct(sum(r.excerpt == "caught" for r in g), len(g)),
                        str(sum(r.outcome is not None and r.status != r.excerpt for r in g))])
    parts.append(_table(["corpus", "commits", "caught", "flagged after fix", "missed",
                         "no checkout or lint failed",
                         "file not linted", "excerpt caught", "differs from excerpt"],
                        summary, markdown))
    by_rule: dict[str, list[ProjectOutcome]] = defaultdict(list)
    for r in results:
        by_rule[r.entry["expected_rule"] or "none"].append(r)
    parts.append(_table(["expected rule", "commits", "caught", "excerpt caught"], [
        [rule, str(len(g)), _pct(sum(r.status == "caught" for r in g), len(g)),
         _pct(sum(r.excerpt == "caught" for r in g), len(g))]
        for rule, g in sorted(by_rule.items())], markdown))
    differ = [f"{r.corpus}/{r.entry['id']}: {r.excerpt} in the excerpt, {r.status} in the project"
              + (f" (the file is not linted: {r.path_errors[0]})" if r.path_errors else "")
              for r in results if r.outcome is not None and r.status != r.excerpt]
    parts.append("Commits the whole project changes:" + (
        "".join(f"\n* {d}" for d in differ) if differ else " none."))
    errors = Counter()
    for r in results:
        errors.update(r.linter_errors)
    if errors:
        parts.append("Linter errors over the projects (both commits): " + ", ".join(
            f"{code} {n}" for code, n in sorted(errors.items())))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", help="corpus directory (repeatable; default "
                    "benchmarks/lint_recall)")
    ap.add_argument("--mirrors", required=True,
                    help="JSON file mapping owner/name to a git dir, or a folder of repositories")
    ap.add_argument("--only", help="comma-separated commit ids to score")
    ap.add_argument("--select", default="ALL", help="rule selection passed to torchmem lint")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--json", help="also write the per-commit results to this JSON file")
    ap.add_argument("--diff-lines-only", action="store_true",
                    help="score the diff's changed lines only, without the excerpt's lines")
    args = ap.parse_args(argv)
    corpora = [Path(c) for c in args.corpus or [DEFAULT_CORPUS]]
    only = set(args.only.split(",")) if args.only else None
    try:
        results = evaluate_corpora(corpora, Path(args.mirrors), args.select, only,
                                   progress=lambda r: print(_line(r), file=sys.stderr, flush=True),
                                   carry=not args.diff_lines_only)
    except CorpusError as exc:
        print(f"lint_recall_project: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps([to_dict(r) for r in results], indent=1),
                                   encoding="utf-8")
    print(render(results, markdown=args.markdown))
    return 0


def to_dict(r: ProjectOutcome) -> dict:
    """One result as plain JSON data."""
    o = r.outcome
    return {"id": r.entry["id"], "corpus": r.corpus, "repo": r.entry["repo"],
            "status": r.status, "excerpt": r.excerpt, "reason": r.reason,
            "before_codes": o.before_codes if o else [], "after_codes": o.after_codes if o else [],
            "findings_in_file": [o.before_total, o.after_total] if o else [],
            "files": r.files, "lines": r.lines, "changed": list(r.changed),
            "carried": list(r.carried),
            "missing_blobs": r.missing_blobs, "seconds": round(r.seconds, 2),
            "linter_errors": dict(r.linter_errors), "path_errors": r.path_errors}


if __name__ == "__main__":
    raise SystemExit(main())
