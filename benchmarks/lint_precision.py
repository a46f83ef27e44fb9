"""Precision of ``torchmem lint`` on real projects: findings, true/false, FP per 10k lines.

Each finding was read by a person and judged in ``lint_precision_verdicts.csv`` (columns:
rule code, path relative to the corpus directory, line, verdict ``true``/``false``;
``true-minor`` in the held-out file marks a correct finding that is harmless, counted as
true). The
checkouts themselves are not part of the repository: fetch the projects at the commits
listed in docs/lint-precision.md into one directory (one sub-directory per project).

Usage:
    python benchmarks/lint_precision.py CORPUS_DIR [--verdicts FILE] [--select CODES]

Prints a Markdown table per project and per rule, then every finding without a verdict
(to be judged) and every verdict whose finding has disappeared (fixed false positives).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from torchmem.lint.config import LintConfig
from torchmem.lint.files import lint_paths


def load_verdicts(path: Path) -> dict[tuple[str, str, int], str]:
    out: dict[tuple[str, str, int], str] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            if not row or row[0].startswith("#") or row[0] == "code":
                continue
            code, rel, line, verdict = (c.strip() for c in row[:4])
            if verdict not in ("true", "true-minor", "false"):
                raise SystemExit(f"{path}: verdict must be true, true-minor or false; "
                                 f"got {verdict!r}")
            out[(code, rel, int(line))] = "true" if verdict == "true-minor" else verdict
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--verdicts", default=str(HERE / "lint_precision_verdicts.csv"))
    ap.add_argument("--select", default=None, help="rule selection (default: default set)")
    args = ap.parse_args(argv)
    corpus = Path(args.corpus)
    verdicts = load_verdicts(Path(args.verdicts)) if os.path.exists(args.verdicts) else {}
    select = args.select.split(",") if args.select else None

    rows = []
    per_rule: dict[str, Counter[str]] = defaultdict(Counter)
    seen: set[tuple[str, str, int]] = set()
    unreviewed = []
    for project in sorted(p for p in corpus.iterdir() if p.is_dir()):
        result = lint_paths([str(project)], select=select,
                            config=LintConfig(respect_gitignore=False), jobs=None)
        counts: Counter[str] = Counter()
        for v in result.violations:
            rel = Path(v.path).relative_to(corpus).as_posix()
            key = (v.code, rel, v.line)
            seen.add(key)
            verdict = verdicts.get(key)
            counts[verdict or "unreviewed"] += 1
            per_rule[v.code][verdict or "unreviewed"] += 1
            if verdict is None:
                unreviewed.append(f"{v.code},{rel},{v.line},?  # {v.message[:90]}")
        fp_rate = counts["false"] / result.lines * 10_000 if result.lines else 0.0
        rows.append((project.name, result.files, result.lines, len(result.violations),
                     counts["true"], counts["false"], counts["unreviewed"], fp_rate,
                     len(result.errors)))

    print("| project | files | lines | findings | true | false | unreviewed | "
          "FP per 10k lines |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    tot = [0] * 6
    for name, files, lines, found, t, f, u, rate, _ in rows:
        print(f"| {name} | {files} | {lines:,} | {found} | {t} | {f} | {u} | {rate:.2f} |")
        for i, x in enumerate((files, lines, found, t, f, u)):
            tot[i] += x
    rate = tot[4] / tot[1] * 10_000 if tot[1] else 0.0
    print(f"| **total** | {tot[0]} | {tot[1]:,} | {tot[2]} | {tot[3]} | {tot[4]} | {tot[5]} | "
          f"{rate:.2f} |")
    print()
    print("| rule | findings | true | false | unreviewed |")
    print("|---|---:|---:|---:|---:|")
    for code in sorted(per_rule):
        c = per_rule[code]
        print(f"| {code} | {sum(c.values())} | {c['true']} | {c['false']} | "
              f"{c['unreviewed']} |")
    errors = sum(r[8] for r in rows)
    if errors:
        print(f"\n{errors} files could not be linted (E902/E999/TMM000)")
    if unreviewed:
        print(f"\n{len(unreviewed)} findings without a verdict:")
        print("\n".join(unreviewed))
    gone = sorted(k for k in verdicts if k not in seen)
    if gone:
        print(f"\n{len(gone)} verdicts whose finding is gone (fixed or moved):")
        print("\n".join(f"{c},{p},{n},{verdicts[(c, p, n)]}" for c, p, n in gone))
    return 0


if __name__ == "__main__":
    sys.exit(main())
