"""Time and memory of ``torchmem report snapshot.pickle`` on a snapshot of a given size.

Writes a synthetic CUDA memory snapshot in PyTorch's real format (a simulated training
loop over a caching allocator: ``tests/report/snapshot_factory.py``, whose writer is
checked byte for byte against ``pickle.dumps`` by the tests), then runs, each in a fresh
process and interleaved (A, B, A, B...):

* **pickle.load**: what ``torch.cuda._memory_viz`` and every tool built on
  ``pickle.load`` does before it can look at anything (and what a hostile file would
  exploit);
* **torchmem report**: ``torchmem report FILE --json OUT`` (read, analyse, write), the
  text report going to ``/dev/null``.

Prints one row per tool: the median wall time and CPU time, the peak resident set size
of the process (``ru_maxrss``) and its ratio to the file size, then the ratio of the two
tools. A last line describes the snapshot (entries, bytes and frames per entry) and the
machine (CPU microseconds for ``sum(range(1000))``, load average), because the figures
depend on both. Usage::

    python benchmarks/snapshot_import.py [--size 1GiB] [--runs 3] [--dir /tmp] [--no-baseline]

The snapshot is written once under ``--dir`` and reused while its size and parameters
match (``--regenerate`` writes it again).
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
sys.path.insert(0, str(ROOT / "tests" / "report"))

import snapshot_factory as sf  # noqa: E402

from torchmem.units import format_bytes, parse_bytes  # noqa: E402

#: the simulated run: a 24-layer model with 300 parameter tensors, 3 levels of module
#: nesting, C++ frames recorded (stacks="all"), one activation kept every 50 steps
RUN = dict(layers=24, depth=3, params=300, leak_every=50)

_CHILD = r"""
import json, os, resource, sys, time
path, tool, out = sys.argv[1], sys.argv[2], sys.argv[3]
w, c = time.perf_counter(), time.process_time()
if tool == "pickle.load":
    import pickle
    with open(path, "rb") as fh:
        data = pickle.load(fh)
    entries = sum(len(t) for t in data["device_traces"])
else:
    from torchmem.cli import main
    with open(os.devnull, "w") as null:
        sys.stdout = null
        rc = main(["report", path, "--json", out, "--text"])
        sys.stdout = sys.__stdout__
    assert rc == 0, rc
    entries = sum(d["entries"] for d in json.load(open(out))["devices"])
wall, cpu = time.perf_counter() - w, time.process_time() - c
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"wall": wall, "cpu": cpu, "rss": rss, "entries": entries}))
"""


def _calibrate() -> float:
    best = float("inf")
    for _ in range(5):
        t = time.process_time()
        for _ in range(2000):
            sum(range(1000))
        best = min(best, (time.process_time() - t) / 2000 * 1e6)
    return best


def _snapshot(size: int, folder: Path, regenerate: bool) -> tuple[Path, dict[str, float]]:
    """Write (or reuse) a snapshot of about ``size`` bytes; return it and its shape."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torchmem-bench-snapshot-{size}.pickle"
    meta = path.with_suffix(".json")
    want = {"size": size, "run": RUN, "version": 1}
    if path.exists() and meta.exists() and not regenerate:
        known = json.loads(meta.read_text())
        if known.get("want") == want:
            return path, known["shape"]
    with tempfile.TemporaryDirectory() as tmp:  # bytes per step, from two short runs
        probe = Path(tmp) / "probe.pickle"
        sizes = {}
        for steps in (20, 60):
            sf.write_streamed(probe, sf.TrainingRun(steps=steps, **RUN))
            sizes[steps] = probe.stat().st_size
    per_step = (sizes[60] - sizes[20]) / 40
    steps = max(1, round((size - (sizes[20] - 20 * per_step)) / per_step))
    started = time.perf_counter()
    entries = sf.write_streamed(path, sf.TrainingRun(steps=steps, **RUN))
    counts = [len(e.get("frames", ())) for e in sf.TrainingRun(steps=2, **RUN).events()]
    shape = {"entries": entries, "steps": steps, "bytes_per_entry": path.stat().st_size / entries,
             "frames_per_entry": sum(counts) / len(counts),
             "write_s": time.perf_counter() - started}
    meta.write_text(json.dumps({"want": want, "shape": shape}))
    return path, shape


def _run(path: Path, tool: str, out: Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), tool, str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{tool} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1GiB", help="snapshot size (default 1GiB)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each tool (median)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the snapshot goes")
    parser.add_argument("--no-baseline", action="store_true", help="skip pickle.load")
    parser.add_argument("--regenerate", action="store_true", help="write the snapshot again")
    args = parser.parse_args()
    size = parse_bytes(args.size)
    path, shape = _snapshot(size, Path(args.dir), args.regenerate)
    file_bytes = path.stat().st_size
    tools = ["torchmem report"] if args.no_baseline else ["pickle.load", "torchmem report"]
    results: dict[str, list[dict[str, float]]] = {t: [] for t in tools}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for tool in tools:
                results[tool].append(_run(path, tool, Path(tmp) / "report.json"))
    calib = _calibrate()
    print(f"snapshot: {format_bytes(file_bytes)}, {shape['entries']:,} trace entries, "
          f"{shape['bytes_per_entry']:.0f} bytes and {shape['frames_per_entry']:.0f} frames "
          f"per entry ({args.runs} runs each, interleaved, medians)")
    print(f"{'tool':<18}{'wall s':>9}{'cpu s':>9}{'peak RSS':>12}{'RSS/file':>10}"
          f"{'µs/entry (cpu)':>16}")
    medians = {}
    for tool, runs in results.items():
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        rss = statistics.median(r["rss"] for r in runs)
        medians[tool] = (wall, cpu, rss)
        print(f"{tool:<18}{wall:>9.1f}{cpu:>9.1f}{format_bytes(rss):>12}"
              f"{rss / file_bytes:>10.2f}{cpu / max(runs[0]['entries'], 1) * 1e6:>16.2f}")
    if len(medians) == 2:
        (w0, c0, r0), (w1, c1, r1) = medians["pickle.load"], medians["torchmem report"]
        print(f"{'ratio (torchmem / pickle.load)':<36} wall {w1 / w0:.2f}x, cpu {c1 / c0:.2f}x, "
              f"peak RSS {r1 / r0:.2f}x")
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"machine: sum(range(1000)) takes {calib:.1f} µs of CPU; load average "
          f"{load[0]:.1f} on {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
