"""Cost of the live view: plain ``python`` vs ``torchmem run`` vs ``torchmem run --live``.

Each trial runs ``benchmarks/workloads.py <loop>`` as a fresh process three ways, in
turn (A/B/C, A/B/C... so that load on the machine hits all sides alike), each with its
stderr on a pseudo-terminal (python's ``pty``, 120x40) so that ``--live`` is really on
and draws its panel, and with the same terminal for the other two sides. The loop
measures its own step times (process start-up and imports excluded). Prints, per side,
the median over the trials of the median step time and of the mean step time (the mean
includes the refreshes the median may skip), and their ratios to plain python.

    python benchmarks/live_view.py --trials 5 --steps 300
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads.py"


def one(workload: str, steps: int, under: list[str]) -> tuple[float, float, int]:
    """(median step s, mean step s, bytes drawn on the terminal) of one run."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    cmd = [sys.executable, *under, str(WORKLOADS), workload, "--steps", str(steps)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, env={**os.environ, "TERM": "xterm"})
    os.close(slave)
    drawn = 0
    while True:  # drain the terminal, or the child blocks once its buffer is full
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            drawn += len(data)
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode() if proc.stdout is not None else ""
    if proc.wait() != 0:
        raise SystemExit(f"{' '.join(cmd)} failed")
    os.close(master)
    line = [ln for ln in out.splitlines() if ln.startswith("{")][-1]
    result = json.loads(line)
    return float(result["median_step_s"]), float(result["total_s"]) / steps, drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workloads", nargs="+", default=["mlp", "lstm_cell"])
    args = parser.parse_args()
    sides = {
        "python": [],
        "torchmem run": ["-m", "torchmem", "run", "--quiet"],
        "run --live": ["-m", "torchmem", "run", "--quiet", "--live"],
    }
    print(f"live view cost: step time, median of {args.trials} interleaved trials, "
          f"{args.steps} steps each, 1 torch thread, stderr on a pseudo-terminal (120x40)")
    print(f"{'workload':<10} {'side':<13} {'median (ms)':>12} {'ratio':>6} {'mean (ms)':>10} "
          f"{'ratio':>6} {'drawn (KiB)':>12}")
    for workload in args.workloads:
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in sides}
        for _ in range(args.trials):
            for name, under in sides.items():
                results[name].append(one(workload, args.steps, under))
        base_med = statistics.median(r[0] for r in results["python"])
        base_mean = statistics.median(r[1] for r in results["python"])
        for name in sides:
            med = statistics.median(r[0] for r in results[name])
            mean = statistics.median(r[1] for r in results[name])
            drawn = statistics.median(r[2] for r in results[name]) / 1024
            print(f"{workload:<10} {name:<13} {med * 1e3:>12.3f} {med / base_med:>6.3f} "
                  f"{mean * 1e3:>10.3f} {mean / base_mean:>6.3f} {drawn:>12.1f}")


if __name__ == "__main__":
    main()
