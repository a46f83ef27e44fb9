"""Cost of ``torchmem doctor``: step time against plain ``python``, and deep-analysis cost.

Part 1 -- step time. Each trial runs ``benchmarks/workloads.py <loop>`` as a fresh
process five ways, interleaved A/B/C/D/E/A/B/C/D/E so that load on the machine hits all
sides alike: plain ``python``, ``torchmem run --quiet``, ``torchmem doctor --quiet`` (the
default mode: per-step bookkeeping plus the deep analysis at steps 2, 3, 4, 6, 8, 12...),
``torchmem doctor --quiet --interval 0`` (the same without the background sampler
of the timeline) and ``torchmem doctor --quiet --growth-only`` (the verdict only).
The loop times its own steps, so process start-up and imports are excluded. Both the
median step time and the mean (total / steps, which includes the analysis steps) are
reported, as medians over the trials.

Part 2 -- deep analysis against the number of live objects, in this process: the time of
one snapshot of user state (:func:`torchmem.doctor.culprit.take_snapshot`) when the
script's variables reach N objects (N/2 small tensors in a list, N/2 dicts), and of the
young-generation garbage inspection (:func:`torchmem.doctor.garbage.inspect_garbage`)
and a full one, with N extra gc-tracked objects alive.

    python benchmarks/doctor_overhead.py --trials 5 --steps 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads.py"


def one(workload: str, steps: int, under: list[str]) -> tuple[float, float]:
    cmd = [sys.executable, *under, str(WORKLOADS), workload, "--steps", str(steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    data = json.loads(line)
    return float(data["median_step_s"]), float(data["total_s"]) / int(data["steps"])


def step_time(trials: int, steps: int, workloads: list[str]) -> None:
    sides = {"python": [], "torchmem run": ["-m", "torchmem", "run", "--quiet"],
             "torchmem doctor": ["-m", "torchmem", "doctor", "--quiet"],
             "doctor, no timeline": ["-m", "torchmem", "doctor", "--quiet", "--interval", "0"],
             "doctor --growth-only": ["-m", "torchmem", "doctor", "--quiet", "--growth-only"]}
    print(f"Step time: medians over {trials} interleaved trials of {steps} steps, 1 torch thread")
    print(f"{'workload':<10} {'side':<20} {'median ms':>10} {'mean ms':>9} {'ratio(median)':>14} "
          f"{'ratio(mean)':>12}")
    for workload in workloads:
        res: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for _ in range(trials):
            for name, under in sides.items():
                res[name].append(one(workload, steps, under))
        base_med = statistics.median(m for m, _ in res["python"])
        base_mean = statistics.median(a for _, a in res["python"])
        for name in sides:
            med = statistics.median(m for m, _ in res[name])
            mean = statistics.median(a for _, a in res[name])
            print(f"{workload:<10} {name:<20} {med * 1e3:>10.3f} {mean * 1e3:>9.3f} "
                  f"{med / base_med:>14.3f} {mean / base_mean:>12.3f}")


def analysis_cost(sizes: list[int], repeats: int) -> None:
    import gc

    import torch

    from torchmem.doctor.culprit import take_snapshot
    from torchmem.doctor.garbage import inspect_garbage

    here = __file__

    def user(f: str) -> bool:
        return f == here

    print()
    print(f"Deep analysis cost vs objects reachable from the script's variables "
          f"(median of {repeats})")
    print(f"{'objects':>9} {'gc objects':>11} {'snapshot ms':>12} {'us/object':>10} "
          f"{'young gc ms':>12} {'full gc ms':>11}")
    for n in sizes:
        tensors = [torch.zeros(4) for _ in range(n // 2)]  # noqa: F841 - reached by the walk
        records = [{"step": i, "loss": float(i)} for i in range(n // 2)]  # noqa: F841
        frame = sys._getframe()
        snap_t, young_t, full_t = [], [], []
        for _ in range(repeats):
            t = time.perf_counter()
            snap = take_snapshot(1, frame, None, user)
            snap_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            inspect_garbage(1, 1, user, generation=1)
            young_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            inspect_garbage(1, 1, user, generation=2)
            full_t.append(time.perf_counter() - t)
        objs = len(gc.get_objects())
        s = statistics.median(snap_t)
        print(f"{snap.objects:>9} {objs:>11} {s * 1e3:>12.2f} {s / max(snap.objects, 1) * 1e6:>10.2f} "
              f"{statistics.median(young_t) * 1e3:>12.2f} {statistics.median(full_t) * 1e3:>11.2f}")
        del tensors, records, frame, snap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workloads", nargs="+", default=["mlp", "lstm_cell"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-steps", action="store_true", help="only the analysis-cost table")
    args = parser.parse_args()
    if not args.skip_steps:
        step_time(args.trials, args.steps, args.workloads)
    analysis_cost(args.sizes, args.repeats)


if __name__ == "__main__":
    main()
