"""What proving the fixes costs: ``torchmem doctor`` with and without ``--verify``.

Runs ``python -m torchmem doctor --verify`` and ``--no-verify`` on a few corpus scripts,
alternating the two (so that the machine's load hits both alike), ``--rounds`` times
each, and prints the median wall time of each, the ratio, what the verification
concluded, and the 1-minute load average before and after (a busy machine inflates
both columns).

Usage::

    python benchmarks/doctor_verify_cost.py
    python benchmarks/doctor_verify_cost.py --rounds 5 --scripts tests/doctor_corpus/text_classifier.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SCRIPTS = [
    ROOT / "tests" / "doctor_corpus" / "trainer_history.py",
    ROOT / "tests" / "doctor_corpus" / "lstm_keyword_stream.py",
    ROOT / "tests" / "doctor_corpus_public" / "labelmodels_naive_bayes.py",
    ROOT / "tests" / "doctor_corpus_public" / "recbole_trainer_losses.py",
]


def one_run(script: Path, flag: str) -> tuple[float, str]:
    """Wall time of one doctor run and the judged verification status."""
    with tempfile.TemporaryDirectory(prefix="torchmem-cost-") as tmp:
        capture = Path(tmp) / "capture.json"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "torchmem", "doctor", "--quiet", flag,
                        "--json", str(capture), str(script.resolve())], cwd=tmp, capture_output=True,
                       timeout=1800, check=False)
        seconds = time.perf_counter() - started
        try:
            data = json.loads(capture.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return seconds, "no capture"
    statuses = [(f.get("verification") or {}).get("status") or f.get("fix_kind") or "-"
                for f in data.get("findings") or ()]
    return seconds, ", ".join(statuses) or "no findings"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scripts", nargs="*", type=Path, default=DEFAULT_SCRIPTS)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    print("| script | doctor --no-verify (median s) | doctor --verify (median s) | ratio | "
          "verification |")
    print("|---|---|---|---|---|")
    for script in args.scripts:
        times: dict[str, list[float]] = {"--no-verify": [], "--verify": []}
        outcome = ""
        for _ in range(args.rounds):
            for flag in ("--no-verify", "--verify"):
                seconds, status = one_run(script, flag)
                times[flag].append(seconds)
                if flag == "--verify":
                    outcome = status
        base, verified = (statistics.median(times[f]) for f in ("--no-verify", "--verify"))
        print(f"| {script.name} | {base:.1f} | {verified:.1f} | {verified / base:.2f} | "
              f"{outcome} |", flush=True)
    print(f"\nload average (1 min): {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, "
          f"on {os.cpu_count()} cores; {args.rounds} rounds, alternating")
    return 0


if __name__ == "__main__":
    sys.exit(main())
