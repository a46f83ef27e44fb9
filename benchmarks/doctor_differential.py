"""Does ``torchmem doctor`` leave the scripts it diagnoses unchanged? A differential check.

For every script of a corpus directory (``manifest.json`` lists them with their
``script_args``), runs it three times through real subprocesses, in the same temp working
directory layout:

* ``python script.py`` twice -- to learn whether the script's stdout is deterministic (a
  script that prints its RSS, a time or an unseeded random number is not);
* ``python -m torchmem doctor script.py`` once (the doctor's own default options).

and compares: the exit code always, stdout byte for byte when the two plain runs agreed.
A script whose exit code or deterministic stdout changes under the doctor is a **break**,
the one outcome torchmem must never produce. Prints one row per script and the totals.

Usage::

    python benchmarks/doctor_differential.py --corpus tests/doctor_corpus_public
    python benchmarks/doctor_differential.py --corpus tests/doctor_corpus_holdout --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Outcome:
    """What one script did plain and under the doctor."""

    script: str
    plain_code: int | None
    doctor_code: int | None
    deterministic: bool
    same_stdout: bool | None
    seconds: float
    detail: str = ""

    @property
    def broken(self) -> bool:
        return self.plain_code != self.doctor_code or self.same_stdout is False


def _run(cmd: list[str], cwd: Path, timeout: float) -> tuple[int | None, str, str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=env, errors="replace")
    except subprocess.TimeoutExpired:
        return None, "", "timeout"
    return proc.returncode, proc.stdout, proc.stderr


def check(corpus: Path, entry: dict, timeout: float) -> Outcome:
    """Run one manifest entry plain (twice) and under the doctor; compare."""
    script = corpus / entry["script"]
    args = list(entry.get("script_args", ()))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="torchmem-diff-") as tmp:
        cwd = Path(tmp)
        c1, out1, err1 = _run([sys.executable, str(script), *args], cwd, timeout)
        c2, out2, _ = _run([sys.executable, str(script), *args], cwd, timeout)
        cd, outd, errd = _run([sys.executable, "-m", "torchmem", "doctor", str(script), *args],
                              cwd, timeout)
    deterministic = c1 == c2 and out1 == out2
    same = (outd == out1) if deterministic else None
    detail = ""
    if c1 != cd:
        tail = (errd or "").strip().splitlines()
        detail = f"exit {c1} -> {cd}: {tail[-1][:120] if tail else ''}"
    elif same is False:
        a, b = out1.splitlines(), outd.splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        detail = f"stdout differs at line {first + 1} ({len(a)} vs {len(b)} lines)"
    return Outcome(entry["script"], c1, cd, deterministic, same,
                   time.perf_counter() - started, detail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "doctor_corpus_public")
    parser.add_argument("--jobs", type=int, default=1, help="scripts checked at a time")
    parser.add_argument("--only", default="", help="comma-separated substrings of script names")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    args = parser.parse_args(argv)
    args.corpus = args.corpus.resolve()  # the scripts run from a temp working directory
    manifest = json.loads((args.corpus / "manifest.json").read_text(encoding="utf-8"))
    entries = [e for e in manifest["scripts"] if e.get("device", "cpu") == "cpu"]
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        entries = [e for e in entries if any(k in e["script"] for k in keys)]
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        results = list(pool.map(lambda e: check(args.corpus, e, args.timeout), entries))
    width = max([len(r.script) for r in results] + [6])
    print(f"{'script':<{width}}  plain  doctor  stdout            verdict")
    for r in results:
        stdout = ("same" if r.same_stdout else "DIFFERENT") if r.deterministic else "nondeterministic"
        verdict = "BREAK " + r.detail if r.broken else "ok"
        print(f"{r.script:<{width}}  {r.plain_code!s:>5}  {r.doctor_code!s:>6}  {stdout:<18}"
              f"{verdict}")
    compared = sum(r.deterministic for r in results)
    broken = [r for r in results if r.broken]
    print()
    print(f"scripts            {len(results)}")
    print(f"same exit code     {sum(r.plain_code == r.doctor_code for r in results)}/{len(results)}")
    print(f"same stdout        {sum(bool(r.same_stdout) for r in results)}/{compared} "
          f"(of the scripts whose stdout is deterministic)")
    print(f"breaks             {len(broken)}")
    failing = [r.script for r in results if r.plain_code != 0]
    if failing:  # corpus scripts exit 0: a failing plain run means nothing was compared
        print(f"plain run failed   {len(failing)}: {', '.join(failing)}")
    return 1 if broken or failing else 0


if __name__ == "__main__":
    sys.exit(main())
