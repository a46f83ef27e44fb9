"""Cost of memory-per-line tools on the MLP and LSTM-cell training loops.

Each variant runs ``benchmarks/workloads.py <loop> --steps N`` in its own process, and the
loop itself reports the time of its N steps (after 10 warm-up steps: process start-up,
imports and the first steps are excluded). Variants:

* ``plain``: ``python workloads.py``;
* ``torchmem doctor``: the doctor alone (step hooks, sampler, analysis at a few steps):
  what ``torchmem lines`` runs besides its line attribution;
* ``torchmem lines``: ``torchmem lines`` with its default overhead budget (0.4: profile
  pairs of steps exactly while the overhead stays within 40% of the plain run time);
* ``torchmem lines --all-steps``: every step profiled exactly (the floor of the storage
  engine's dispatch mode plus the line attribution);
* ``tracemalloc``: ``python -X tracemalloc=1`` (Python's own allocation tracer; it does
  not see tensor memory, which torch allocates outside Python's allocators);
* ``memray``: ``python -m memray run`` (intercepts ``malloc``: sees tensor memory, per
  Python line), when memray is installed (``pip install memray``; not a dependency of
  torchmem).

pytorch_memlab's ``LineProfiler`` is not timed: it reads only ``torch.cuda`` statistics
and prints "No data collected" on a CPU. A tool that is not installed is skipped.

The variants run interleaved (A/B/C/D/E, A/B/C/D/E...) for ``--rounds`` rounds, so a
machine shared with other work slows them alike; each figure is the median over the
rounds of the mean step time (total of the N steps / N: the profiled steps count). Usage::

    python benchmarks/lines.py [--rounds 5] [--steps 200] [--loops mlp lstm_cell]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads.py"


def variants(tmp: str) -> dict[str, list[str]]:
    py = sys.executable
    out: dict[str, list[str]] = {
        "plain": [py, str(WORKLOADS)],
        "torchmem doctor": [py, "-m", "torchmem", "doctor", "--quiet", str(WORKLOADS)],
        "torchmem lines": [py, "-m", "torchmem", "lines", "--quiet", str(WORKLOADS)],
        "torchmem lines --all-steps": [py, "-m", "torchmem", "lines", "--quiet",
                                       "--all-steps", str(WORKLOADS)],
        "tracemalloc": [py, "-X", "tracemalloc=1", str(WORKLOADS)],
    }
    if importlib.util.find_spec("memray") is not None:
        out["memray"] = [py, "-m", "memray", "run", "-q", "-f", "-o",
                         os.path.join(tmp, "memray.bin"), str(WORKLOADS)]
    return out


def one(cmd: list[str], loop: str, steps: int) -> float:
    """Mean seconds per step of one run (the loop's own measurement)."""
    proc = subprocess.run([*cmd, loop, "--steps", str(steps)], capture_output=True, text=True,
                          check=True, cwd=HERE)
    line = [s for s in proc.stdout.splitlines() if s.startswith("{")][-1]
    data = json.loads(line)
    return float(data["total_s"]) / int(data["steps"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--loops", nargs="+", default=["mlp", "lstm_cell"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tools = variants(tmp)
        print(f"mean step time over {args.steps} steps (after 10 warm-up steps), median of "
              f"{args.rounds} interleaved rounds; one process per run")
        if "memray" not in tools:
            print("memray: not installed, skipped (pip install memray)")
        print("pytorch_memlab LineProfiler: not timed (reads torch.cuda statistics only; "
              "'No data collected' on a CPU)")
        for loop in args.loops:
            times: dict[str, list[float]] = {name: [] for name in tools}
            for _ in range(args.rounds):
                for name, cmd in tools.items():
                    times[name].append(one(cmd, loop, args.steps))
            base = statistics.median(times["plain"])
            print(f"\n{loop}")
            print(f"{'variant':<28} {'ms/step':>9} {'x plain':>8}")
            for name, values in times.items():
                med = statistics.median(values)
                print(f"{name:<28} {med * 1e3:>9.3f} {med / base:>8.2f}")


if __name__ == "__main__":
    main()
