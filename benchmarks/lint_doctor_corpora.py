"""``torchmem lint`` on the doctor's corpora: whole real scripts, with the leak's line known.

The doctor's corpora (``tests/doctor_corpus*/``) are real public scripts (bug reports,
forum threads, repositories before a memory fix), adapted only to run on CPU, each with a
``manifest.json`` entry that names the cause, the line of the statement that keeps the
memory (``line``) and, for most, the line the fix changes (``fix.line``). A leaky script was
measured to grow (or to compute wrong gradients, for ``grad_not_cleared``); a ``healthy_``
script was measured to be flat, although it looks suspicious on purpose.

Unlike the recall excerpts of ``benchmarks/lint_recall*/``, these are whole programs: the
loop, the model and the code that keeps the memory are in the one file the linter reads.
So this measures the rules on what a user lints, a training or inference script.

Definitions:

* **caught**: a leaky script has a finding of the selected rules whose lines overlap the
  statement of one of its ``line`` entries or of ``fix.line`` (a line stands for the
  smallest statement holding it, a compound statement's header only, as in
  ``benchmarks/lint_recall.py``);
* **elsewhere**: a leaky script with findings, none of them on those statements;
* **healthy flagged**: a ``healthy_`` script with at least one finding. Such a finding is
  not false by definition (evaluation without ``no_grad`` wastes memory while it runs
  without growing), so every one is listed with ``--list`` to be read and judged.

Usage:
    python benchmarks/lint_doctor_corpora.py [--corpus DIR ...] [--select CODES]
                                             [--markdown] [--list]

Default corpora: every ``tests/doctor_corpus*/`` directory with a manifest. Default
selection: the rules on by default (``--select ALL`` for every rule). It runs
``python -m torchmem lint --format json --isolated --exit-zero`` once per corpus (the real
CLI, in a subprocess) and prints recall per corpus and per cause; ``--list`` adds one row per
script. Cost: a few seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from lint_recall import (  # noqa: E402  (sibling scripts, not a package)
    CorpusError,
    _on,
    _pct,
    _table,
    run_lint,
    statement_spans,
)

DEFAULT_SELECT = "default"


@dataclass
class Scored:
    """What the linter said about one script of a doctor corpus."""

    corpus: str
    script: str
    cause: str
    codes_at_leak: list[str]  # rules with a finding on the leak's statements
    findings: list[dict]  # every finding in the script

    @property
    def healthy(self) -> bool:
        return self.cause == "healthy"

    @property
    def caught(self) -> bool:
        return not self.healthy and bool(self.codes_at_leak)

    @property
    def status(self) -> str:
        if self.healthy:
            return "flagged" if self.findings else "silent"
        if self.caught:
            return "caught"
        return "elsewhere" if self.findings else "missed"


def corpora() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "tests").glob("doctor_corpus*/manifest.json"))


def leak_lines(entry: dict) -> list[int]:
    """The manifest's culprit lines and the fix's line."""
    lines = [int(n) for n in entry.get("line") or []]
    fix = entry.get("fix")
    if isinstance(fix, dict) and fix.get("line"):
        lines.append(int(fix["line"]))
    return lines


def score(corpus: Path, select: str) -> list[Scored]:
    try:
        manifest = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{corpus / 'manifest.json'}: unreadable ({exc})") from None
    entries = manifest["scripts"]
    files = [(corpus / e["script"]).resolve() for e in entries]
    found = run_lint(files, select)
    out = []
    for e, path in zip(entries, files):
        vs = found.get(path, [])
        lines = leak_lines(e)
        at = _on(vs, statement_spans(path.read_text(encoding="utf-8"), lines)) if lines else []
        out.append(Scored(corpus.name, e["script"], e["cause"],
                          sorted({v["code"] for v in at}), vs))
    return out


def render(results: list[Scored], markdown: bool, listing: bool) -> str:
    parts = []
    by_corpus: dict[str, list[Scored]] = defaultdict(list)
    by_cause: dict[str, list[Scored]] = defaultdict(list)
    for r in results:
        by_corpus[r.corpus].append(r)
        if not r.healthy:
            by_cause[r.cause].append(r)

    def leak_row(name: str, group: list[Scored]) -> list[str]:
        leaky = [r for r in group if not r.healthy]
        healthy = [r for r in group if r.healthy]
        return [name, str(len(leaky)), str(sum(r.caught for r in leaky)),
                str(sum(r.status == "elsewhere" for r in leaky)),
                _pct(sum(r.caught for r in leaky), len(leaky)),
                str(len(healthy)), str(sum(bool(r.findings) for r in healthy)),
                str(sum(len(r.findings) for r in healthy))]

    header = ["corpus", "leaky", "caught", "elsewhere", "recall", "healthy",
              "healthy flagged", "findings on healthy"]
    rows = [leak_row(name, g) for name, g in sorted(by_corpus.items())]
    rows.append(leak_row("**all**" if markdown else "all", results))
    parts.append(_table(header, rows, markdown))
    rows = [[cause, str(len(g)), str(sum(r.caught for r in g)),
             _pct(sum(r.caught for r in g), len(g))] for cause, g in sorted(by_cause.items())]
    parts.append(_table(["cause", "leaky", "caught", "recall"], rows, markdown))
    if listing:
        rows = [[r.corpus, r.script, r.cause, r.status, ",".join(r.codes_at_leak) or "-",
                 " ".join(f"{v['code']}:{v['line']}" for v in r.findings) or "-"]
                for r in results]
        parts.append(_table(["corpus", "script", "cause", "result", "at the leak",
                             "all findings"], rows, markdown))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", default=None,
                    help="a doctor corpus directory (repeatable; default: every one)")
    ap.add_argument("--select", default=DEFAULT_SELECT,
                    help="rule selection passed to torchmem lint (default: the default rules)")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--list", action="store_true", help="one row per script")
    args = ap.parse_args(argv)
    dirs = [Path(c) for c in args.corpus] if args.corpus else corpora()
    select = "" if args.select == DEFAULT_SELECT else args.select
    try:
        results = [r for d in dirs for r in score(d, select)]
    except CorpusError as exc:
        print(f"lint_doctor_corpora: error: {exc}", file=sys.stderr)
        return 2
    print(render(results, args.markdown, args.list))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
