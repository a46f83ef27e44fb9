"""Cost of the live view: plain ``python`` vs ``torchmem run`` vs ``torchmem run --live``.

Each trial runs ``benchmarks/workloads.py <loop>`` as a fresh process three ways, in
turn (A/B/C, A/B/C... so that load on the machine hits all sides alike), each with its
stderr on a pseudo-terminal (python's ``pty``, 120x40) so that ``--live`` is really on
and draws its panel, and with the same terminal for the other two sides. The loop
measures its own step times (process start-up and imports excluded). Prints, per side,
the median over the trials of the median step time and of the mean step time (the mean
includes the refreshes the median may skip), and their ratios to plain python.

Then the panel's own cost, which a busy machine does not blur: the same loop run in
process under the runner with the live probe, which counts its refreshes, the time spent
rendering them and the CPU time of its refresh thread (``time.thread_time``), as a share
of the run's wall time: an upper bound of what it can take from the script.

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


def on_pty(cmd: list[str]) -> tuple[str, int]:
    """Run ``cmd`` with stderr on a 120x40 pseudo-terminal: (its stdout, bytes drawn)."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
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
    return out, drawn


def one(workload: str, steps: int, under: list[str]) -> tuple[float, float, int]:
    """(median step s, mean step s, bytes drawn on the terminal) of one run."""
    cmd = [sys.executable, *under, str(WORKLOADS), workload, "--steps", str(steps)]
    out, drawn = on_pty(cmd)
    line = [ln for ln in out.splitlines() if ln.startswith("{")][-1]
    result = json.loads(line)
    return float(result["median_step_s"]), float(result["total_s"]) / steps, drawn


def inner(workload: str, steps: int) -> None:
    """Run the loop under the runner with the live panel on stderr (a terminal) and print
    what the panel cost: refreshes, render time, CPU time of its thread, wall time."""
    import time

    import torch

    from torchmem.doctor.runner import run_script
    from torchmem.doctor.target import Target
    from torchmem.report.live import LiveProbe

    torch.set_num_threads(1)
    live = LiveProbe(sys.stderr, "torchmem run: workloads.py")
    t0 = time.perf_counter()
    run_script(Target(path=str(WORKLOADS), args=[workload, "--steps", str(steps)]), [live])
    wall = time.perf_counter() - t0
    live.close()
    print("@@" + json.dumps({"refreshes": live.refreshes, "render_s": live.render_s,
                             "cpu_s": live.cpu_s, "wall_s": wall}))


def panel_cost(workload: str, steps: int) -> dict[str, float]:
    out, _ = on_pty([sys.executable, __file__, "--inner", workload, "--steps", str(steps)])
    return json.loads([ln for ln in out.splitlines() if ln.startswith("@@")][-1][2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workloads", nargs="+", default=["mlp", "lstm_cell"])
    parser.add_argument("--inner", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.inner, args.steps)
        return
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
    print()
    print("the panel's own cost (refresh thread, in process, median of the trials): CPU time "
          "of the thread as a share of the run's wall time")
    print(f"{'workload':<10} {'refreshes/s':>12} {'render (ms)':>12} {'thread CPU':>11}")
    for workload in args.workloads:
        costs = [panel_cost(workload, args.steps) for _ in range(args.trials)]
        rate = statistics.median(c["refreshes"] / c["wall_s"] for c in costs)
        render = statistics.median(c["render_s"] / max(c["refreshes"], 1) for c in costs)
        share = statistics.median(c["cpu_s"] / c["wall_s"] for c in costs)
        print(f"{workload:<10} {rate:>12.2f} {render * 1e3:>12.2f} {share:>10.2%}")


if __name__ == "__main__":
    main()
