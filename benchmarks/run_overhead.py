"""Overhead of ``torchmem run`` on step time: plain ``python`` vs ``torchmem run``.

Each trial runs ``benchmarks/workloads.py <loop>`` as a fresh process, once plainly and
once under ``torchmem run`` (default Monitor interval), alternating A/B/A/B so that any
load on the machine hits both sides alike. The loop measures its own step times, so
process start-up and imports are excluded. Prints the median step time of each side
over the trials and their ratio.

    python benchmarks/run_overhead.py --trials 5 --steps 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads.py"


def one(workload: str, steps: int, under: list[str]) -> float:
    cmd = [sys.executable, *under, str(WORKLOADS), workload, "--steps", str(steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    return float(json.loads(line)["median_step_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workloads", nargs="+", default=["mlp", "lstm_cell"])
    args = parser.parse_args()
    sides = {"python": [], "torchmem run": ["-m", "torchmem", "run", "--quiet"]}
    print(f"torchmem run overhead: median step time over {args.trials} interleaved trials, "
          f"{args.steps} steps each, 1 torch thread")
    print(f"{'workload':<10} {'python (ms)':>12} {'torchmem run (ms)':>18} {'ratio':>7}")
    for workload in args.workloads:
        results: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.trials):
            for name, under in sides.items():
                results[name].append(one(workload, args.steps, under))
        base = statistics.median(results["python"])
        tm = statistics.median(results["torchmem run"])
        print(f"{workload:<10} {base * 1e3:>12.3f} {tm * 1e3:>18.3f} {tm / base:>7.3f}")


if __name__ == "__main__":
    main()
