"""How well ``torchmem doctor`` diagnoses a corpus of training scripts.

Runs ``torchmem doctor --json`` through the real command line on every script listed in
the corpus's ``manifest.json`` (``tests/doctor_corpus`` by default, ``--corpus DIR`` for
another one such as ``tests/doctor_corpus_public``) and prints, per script, the expected
cause against what the doctor found, the culprit name and line, what became of the fix the
doctor offered, and the time taken; then the totals:

* detection (cause) rate: leaky scripts whose expected cause was found / leaky scripts run;
* culprit accuracy: detected scripts whose culprit name is right / detected scripts;
* line accuracy: detected scripts whose file:line is right / detected scripts;
* culprit name+line rate: leaky scripts found with the right cause, name and line / leaky;
* false alarms: healthy scripts with any finding / healthy scripts run;
* fixes: for the finding judged on each detected script, what the doctor's own verification
  (``torchmem doctor --verify``: the fix applied to the script, which is re-run) recorded:
  *verified* (growth fell, same exit code), *not verified* (the culprit still grows),
  *crashed* (every valid edit made the script fail: withdrawn, the fix became advice),
  *not checked* (why is given), or *advice* (no edit is valid for what the culprit holds,
  e.g. ``with torch.no_grad():`` around a block, "register the hook once").

CUDA-only scripts are skipped (and listed as such) on a machine without CUDA.

Usage::

    python benchmarks/doctor_corpus.py            # whole corpus, 2 scripts at a time
    python benchmarks/doctor_corpus.py --jobs 1 --only lstm,healthy
    python benchmarks/doctor_corpus.py --markdown # a table to paste into docs/corpus.md
    python benchmarks/doctor_corpus.py --corpus tests/doctor_corpus_public --markdown --jobs 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "doctor_corpus"))

from judge import Entry, Result, cuda_available, load_manifest, run_corpus

DEFAULT_CORPUS = ROOT / "tests" / "doctor_corpus"


@dataclasses.dataclass(frozen=True)
class CorpusEntry(Entry):
    """A manifest entry of any corpus directory (the judge's ``Entry`` knows only its own)."""

    corpus_dir: Path = DEFAULT_CORPUS

    @property
    def path(self) -> Path:
        return self.corpus_dir / self.script


def load_entries(corpus: Path) -> list[CorpusEntry]:
    """The manifest of ``corpus`` as entries whose ``path`` points into ``corpus``."""
    return [CorpusEntry(**{f.name: getattr(e, f.name) for f in dataclasses.fields(Entry)},
                        corpus_dir=corpus)
            for e in load_manifest(corpus / "manifest.json")]


# -- fixes --------------------------------------------------------------------------------

@dataclasses.dataclass
class FixCheck:
    """What became of the fix the doctor offered for the judged finding, as the doctor's
    own verification (``torchmem doctor --verify``) recorded it in the capture."""

    status: str  # "none", "advice", "verified", "not verified", "crashed", "not checked"
    detail: str = ""

    @property
    def label(self) -> str:
        if self.status == "none":
            return "-"
        return self.status + (f" ({self.detail})" if self.detail else "")


def fix_check(res: Result) -> FixCheck:
    """The verification outcome of the judged finding's fix (read from the capture)."""
    finding = res.judged
    if finding is None or not finding.get("fix"):
        return FixCheck("none")
    verification = finding.get("verification") or {}
    status = verification.get("status")
    if status is None:
        if finding.get("edit"):
            return FixCheck("not checked", "no verification recorded")
        return FixCheck("advice")
    tried = verification.get("tried") or []
    if status == "verified":
        return FixCheck("verified", f"after {len(tried)} crashed edit(s)" if tried else "")
    if status == "crashed":
        return FixCheck("crashed", "withdrawn: " + (verification.get("reason") or "")[:100])
    return FixCheck(status, (verification.get("reason") or "")[:100])


# -- table --------------------------------------------------------------------------------

def _mark(ok: bool) -> str:
    return "ok" if ok else "MISS"


def row(res: Result, fix: FixCheck) -> list[str]:
    e = res.entry
    if res.error and not res.findings and res.capture is None:
        return [e.script, e.cause, "ERROR: " + res.error, "", "", "", "", "", "", f"{res.seconds:.0f}s"]
    found = ", ".join(res.found_causes) or "-"
    crashed = f" (script under the doctor: {res.error})" if res.error else ""
    if e.healthy:
        verdict = ("FALSE ALARM" if res.false_alarm else "ok") + crashed
        return [e.script, "healthy", found, "", res.found_name or "", "", res.found_line or "",
                verdict, "", f"{res.seconds:.0f}s"]
    expected_name = e.culprit[0] if e.culprit else "(any)"
    expected_line = f"{e.line[0]}" if e.line else "(any)"
    if not res.detected:
        verdict = "MISSED"
    else:
        verdict = ("ok" if res.culprit_ok and res.line_ok
                   else "name " + _mark(res.culprit_ok) + ", line " + _mark(res.line_ok))
    verdict += crashed
    return [e.script, e.cause, found, expected_name, res.found_name or "-", expected_line,
            res.found_line or "-", verdict, fix.label, f"{res.seconds:.0f}s"]


HEADER = ["script", "expected", "found", "culprit (expected)", "culprit (found)",
          "line (expected)", "line (found)", "verdict", "fix", "time"]


def totals(results: list[Result], fixes: list[FixCheck]) -> dict[str, object]:
    leaky = [r for r in results if not r.entry.healthy]
    healthy = [r for r in results if r.entry.healthy]
    detected = [r for r in leaky if r.detected]
    statuses = [f.status for f in fixes]
    return {
        "leaky": len(leaky),
        "detected": len(detected),
        "culprit_ok": sum(r.culprit_ok for r in detected),
        "line_ok": sum(r.line_ok for r in detected),
        "name_and_line_ok": sum(r.culprit_ok and r.line_ok for r in detected),
        "healthy": len(healthy),
        "false_alarms": sum(r.false_alarm for r in healthy),
        "errors": sum(r.error is not None for r in results),
        "extra_findings": sum(
            sum(1 for f in r.findings if f is not r.judged) for r in leaky),
        "fixes_offered": sum(s != "none" for s in statuses),
        "fixes_advice": statuses.count("advice"),
        "fixes_crashed": statuses.count("crashed"),
        "fixes_verified": statuses.count("verified"),
        "fixes_not_verified": statuses.count("not verified"),
        "fixes_not_checked": statuses.count("not checked"),
    }


def _pct(num: int, den: int) -> str:
    return f"{num}/{den} ({100.0 * num / den:.0f}%)" if den else "n/a"


def format_table(rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(HEADER[i]), *(len(r[i]) for r in rows)) for i in range(len(HEADER))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help="corpus directory with a manifest.json (default: tests/doctor_corpus)")
    parser.add_argument("--jobs", type=int, default=2, help="scripts run at a time (default 2)")
    parser.add_argument("--only", default="", help="comma-separated substrings of script names")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds per script, verification re-runs included")
    parser.add_argument("--no-fix-check", action="store_true",
                        help="run the doctor with --no-verify: do not re-run the scripts "
                             "to prove the fixes")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)

    corpus = args.corpus.resolve()
    if not (corpus / "manifest.json").is_file():
        parser.error(f"no manifest.json in {args.corpus}")
    entries: list[Entry] = list(load_entries(corpus))
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        entries = [e for e in entries if any(k in e.script for k in keys)]
    has_cuda = cuda_available()
    skipped = [e for e in entries if e.device == "cuda" and not has_cuda]
    entries = [e for e in entries if e not in skipped]

    started = time.perf_counter()
    done = [0]

    def progress(res: Result) -> None:
        done[0] += 1
        print(f"[{done[0]}/{len(entries)}] {res.entry.script} ({res.seconds:.0f}s)",
              file=sys.stderr, flush=True)

    results = run_corpus(entries, jobs=args.jobs, timeout=args.timeout, on_result=progress,
                         verify=not args.no_fix_check)
    fixes = [FixCheck("none") if args.no_fix_check or r.entry.healthy else fix_check(r)
             for r in results]
    wall = time.perf_counter() - started

    print(format_table([row(r, f) for r, f in zip(results, fixes)], args.markdown))
    t = totals(results, fixes)
    print()
    print(f"detection rate    {_pct(t['detected'], t['leaky'])}  (leaky scripts whose cause was found)")
    print(f"culprit accuracy  {_pct(t['culprit_ok'], t['detected'])}  (right name, of detected)")
    print(f"line accuracy     {_pct(t['line_ok'], t['detected'])}  (right file:line, of detected)")
    print(f"name+line rate    {_pct(t['name_and_line_ok'], t['leaky'])}  (right cause, name and line, of leaky)")
    print(f"false alarms      {_pct(t['false_alarms'], t['healthy'])}  (healthy scripts with a finding)")
    print(f"extra findings    {t['extra_findings']}  (findings on leaky scripts besides the judged one)")
    if not args.no_fix_check:
        print(f"fixes offered     {t['fixes_offered']}: {t['fixes_verified']} verified, "
              f"{t['fixes_not_verified']} not verified, {t['fixes_crashed']} crashed (withdrawn), "
              f"{t['fixes_not_checked']} not checked, {t['fixes_advice']} advice only (no valid edit)")
    print(f"errors            {t['errors']}")
    if skipped:
        print(f"skipped (no CUDA) {len(skipped)}: {', '.join(e.script for e in skipped)}")
    print(f"wall time         {wall:.0f} s with --jobs {args.jobs}")
    if args.json:
        payload = {
            "corpus": str(args.corpus), "totals": t, "wall_s": round(wall, 1),
            "skipped": [e.script for e in skipped],
            "results": [{"script": r.entry.script, "expected": r.entry.cause,
                         "found": r.found_causes, "culprit": r.found_name,
                         "line": r.found_line, "passed": r.passed, "error": r.error,
                         "fix": dataclasses.asdict(f),
                         "fix_text": (r.judged or {}).get("fix"),
                         "seconds": round(r.seconds, 1)} for r, f in zip(results, fixes)],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
