"""How well ``torchmem doctor`` diagnoses the corpus of training scripts.

Runs ``torchmem doctor --json`` through the real command line on every script listed in
``tests/doctor_corpus/manifest.json`` and prints, per script, the expected cause against
what the doctor found, the culprit name and line, and the time taken; then the totals:

* detection rate: leaky scripts whose expected cause was found / leaky scripts run;
* culprit accuracy: detected scripts whose culprit name is right / detected scripts;
* line accuracy: detected scripts whose file:line is right / detected scripts;
* false alarms: healthy scripts with any finding / healthy scripts run.

CUDA-only scripts are skipped (and listed as such) on a machine without CUDA.

Usage::

    python benchmarks/doctor_corpus.py            # whole corpus, 2 scripts at a time
    python benchmarks/doctor_corpus.py --jobs 1 --only lstm,healthy
    python benchmarks/doctor_corpus.py --markdown # a table to paste into docs/corpus.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "doctor_corpus"))

from judge import Entry, Result, cuda_available, load_manifest, run_corpus  # noqa: E402


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISS"


def row(res: Result) -> list[str]:
    e = res.entry
    if res.error and not res.findings and res.capture is None:
        return [e.script, e.cause, "ERROR: " + res.error, "", "", "", "", "", f"{res.seconds:.0f}s"]
    found = ", ".join(res.found_causes) or "-"
    if e.healthy:
        verdict = "FALSE ALARM" if res.false_alarm else "ok"
        return [e.script, "healthy", found, "", res.found_name or "", "", res.found_line or "",
                verdict, f"{res.seconds:.0f}s"]
    expected_name = e.culprit[0] if e.culprit else "(any)"
    expected_line = f"{e.line[0]}" if e.line else "(any)"
    if not res.detected:
        verdict = "MISSED"
    else:
        verdict = ("ok" if res.culprit_ok and res.line_ok
                   else "name " + _mark(res.culprit_ok) + ", line " + _mark(res.line_ok))
    return [e.script, e.cause, found, expected_name, res.found_name or "-", expected_line,
            res.found_line or "-", verdict, f"{res.seconds:.0f}s"]


HEADER = ["script", "expected", "found", "culprit (expected)", "culprit (found)",
          "line (expected)", "line (found)", "verdict", "time"]


def totals(results: list[Result]) -> dict[str, object]:
    leaky = [r for r in results if not r.entry.healthy]
    healthy = [r for r in results if r.entry.healthy]
    detected = [r for r in leaky if r.detected]
    return {
        "leaky": len(leaky),
        "detected": len(detected),
        "culprit_ok": sum(r.culprit_ok for r in detected),
        "line_ok": sum(r.line_ok for r in detected),
        "healthy": len(healthy),
        "false_alarms": sum(r.false_alarm for r in healthy),
        "errors": sum(r.error is not None for r in results),
        "extra_findings": sum(
            sum(1 for f in r.findings if f is not r.judged) for r in leaky),
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="scripts run at a time (default 2)")
    parser.add_argument("--only", default="", help="comma-separated substrings of script names")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)

    entries: list[Entry] = load_manifest()
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

    results = run_corpus(entries, jobs=args.jobs, timeout=args.timeout, on_result=progress)
    wall = time.perf_counter() - started

    print(format_table([row(r) for r in results], args.markdown))
    t = totals(results)
    print()
    print(f"detection rate    {_pct(t['detected'], t['leaky'])}  (leaky scripts whose cause was found)")
    print(f"culprit accuracy  {_pct(t['culprit_ok'], t['detected'])}  (right name, of detected)")
    print(f"line accuracy     {_pct(t['line_ok'], t['detected'])}  (right file:line, of detected)")
    print(f"false alarms      {_pct(t['false_alarms'], t['healthy'])}  (healthy scripts with a finding)")
    print(f"extra findings    {t['extra_findings']}  (findings on leaky scripts besides the judged one)")
    print(f"errors            {t['errors']}")
    if skipped:
        print(f"skipped (no CUDA) {len(skipped)}: {', '.join(e.script for e in skipped)}")
    print(f"wall time         {wall:.0f} s with --jobs {args.jobs}")
    if args.json:
        payload = {
            "totals": t, "wall_s": round(wall, 1), "skipped": [e.script for e in skipped],
            "results": [{"script": r.entry.script, "expected": r.entry.cause,
                         "found": r.found_causes, "culprit": r.found_name,
                         "line": r.found_line, "passed": r.passed, "error": r.error,
                         "seconds": round(r.seconds, 1)} for r in results],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
