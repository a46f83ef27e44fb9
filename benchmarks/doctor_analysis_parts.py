"""Where the doctor's analysis steps spend their time: CPU time per part, in-process.

Runs ``torchmem doctor --quiet`` on a loop of ``benchmarks/workloads.py`` inside this
process, with each part of the analysis wrapped by a CPU-time counter
(``time.thread_time``, so that load from other processes inflates it less than wall
time), and prints one row per part: calls and total CPU milliseconds. ``gc.get_objects``
rows count whole-heap listings (calls without a generation) apart from the young ones.

Run it against another checkout with ``PYTHONPATH=OTHER/src`` to compare two versions of
the doctor on the same loop::

    python benchmarks/doctor_analysis_parts.py lstm_cell --steps 200
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import importlib
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: (module, attribute path) of the parts timed; a part missing in a version is skipped
PARTS = [
    ("torchmem.doctor.probe", "DoctorProbe.on_step"),
    ("torchmem.doctor.probe", "DoctorProbe._snapshot"),
    ("torchmem.doctor.probe", "DoctorProbe._maybe_collect"),
    ("torchmem.doctor.culprit", "measure_unreached"),
    ("torchmem.doctor.walker", "_Walker.walk_root"),
    ("torchmem.doctor.census_holders", "PeakCensus.take"),
    ("torchmem.doctor.snapshot_sites", "SnapshotSites.due"),
    ("torchmem.doctor.leaf_grads", "LeafGrads.on_backward"),
]


def _wrap(totals: dict[str, list[float]], module: str, attr: str) -> None:
    owner: Any = importlib.import_module(module)
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            entry = totals[attr]
            entry[0] += 1
            entry[1] += time.thread_time() - t0

    setattr(owner, name, timed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["mlp", "lstm_cell"])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for module, attr in PARTS:
        try:
            _wrap(totals, module, attr)
        except (ImportError, AttributeError):
            print(f"(no {module}.{attr} in this version)", file=sys.stderr)
    listing = gc.get_objects

    def counted(*a: Any, **k: Any) -> list[Any]:
        t0 = time.thread_time()
        try:
            return listing(*a, **k)
        finally:
            key = "gc.get_objects (young)" if a or k else "gc.get_objects (whole heap)"
            totals[key][0] += 1
            totals[key][1] += time.thread_time() - t0

    gc.get_objects = counted  # type: ignore[assignment]
    from torchmem.cli import main as cli

    try:
        cli(["doctor", "--quiet", str(HERE / "workloads.py"), args.workload,
             "--steps", str(args.steps)])
    finally:
        gc.get_objects = listing  # type: ignore[assignment]
    print(f"\n{args.workload}, {args.steps} steps: CPU time per part of the analysis")
    print(f"{'part':<34} {'calls':>6} {'CPU ms':>9}")
    for name, (calls, seconds) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:<34} {int(calls):>6} {seconds * 1e3:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
