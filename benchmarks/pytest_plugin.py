"""Overhead of torchmem's pytest plugin per test: plain tests vs marked ones.

Writes a test file of N small training-step tests (a 256x256 linear layer, batch 64,
forward + backward) in a temporary directory and runs pytest on it in a fresh process
for each variant, interleaved, R times; prints, per variant, the call time of the first
test of a process, the median call time of the others, and their overhead over plain
tests doing the same work:

* ``peak``: every test marked ``@pytest.mark.torchmem(peak="1 GiB")``;
* ``baseline``: plain tests under ``--torchmem-baseline`` (recording a new file);
* ``no_leak``: ``@pytest.mark.torchmem(no_leak=True, steps=20)``, against plain tests
  that loop over the same step 20 times.

Each test's call is timed by a conftest wrapper outside every plugin. The first test of a
process pays one-time costs (torch's dispatch-mode set-up, the exact tracker's first
census of the live tensors), so the table shows it apart from the median of the others.

Usage: python benchmarks/pytest_plugin.py [--tests 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

HEADER = textwrap.dedent("""
    import pytest
    import torch

    MODEL = torch.nn.Linear(256, 256)

    def step():
        loss = MODEL(torch.randn(64, 256)).pow(2).mean()
        loss.backward()
        MODEL.zero_grad()
""")

BODIES = {
    "plain": ("", "    step()\n"),
    "peak": ("@pytest.mark.torchmem(peak=\"1 GiB\")\n", "    step()\n"),
    "baseline": ("", "    step()\n"),
    "plain x20": ("", "    for _ in range(20):\n        step()\n"),
    "no_leak": ("@pytest.mark.torchmem(no_leak=True, steps=20)\n", "    step()\n"),
}
#: variant -> the plain variant doing the same work
AGAINST = {"peak": "plain", "baseline": "plain", "no_leak": "plain x20"}

CONFTEST = textwrap.dedent("""
    import json, os, time
    import pytest

    TIMES = []

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(item):
        t0 = time.perf_counter()
        try:
            return (yield)
        finally:
            TIMES.append(time.perf_counter() - t0)

    def pytest_sessionfinish(session):
        with open(os.environ["BENCH_TIMES"], "w") as fh:
            json.dump(TIMES, fh)
""")


def write_tests(directory: str, variant: str, n: int) -> str:
    marker, body = BODIES[variant]
    path = os.path.join(directory, f"test_{variant.replace(' ', '_')}.py")
    with open(path, "w") as fh:
        fh.write(HEADER)
        for i in range(n):
            fh.write(f"\n{marker}def test_{i}():\n{body}")
    return path


def run_once(directory: str, path: str, variant: str) -> list[float]:
    """The call time of each test of one pytest process, in order."""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
            path]
    if variant == "baseline":
        base = os.path.join(directory, "peaks.json")
        if os.path.exists(base):
            os.remove(base)
        args.append(f"--torchmem-baseline={base}")
    out = os.path.join(directory, "times.json")
    env = dict(os.environ, BENCH_TIMES=out)
    proc = subprocess.run(args, cwd=directory, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{variant}: pytest failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    with open(out) as fh:
        return [float(t) for t in json.load(fh)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    first: dict[str, list[float]] = {v: [] for v in BODIES}
    rest: dict[str, list[float]] = {v: [] for v in BODIES}
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, "conftest.py"), "w") as fh:
            fh.write(CONFTEST)
        paths = {v: write_tests(directory, v, args.tests) for v in BODIES}
        for _ in range(args.runs):
            for variant in BODIES:  # interleaved: machine load hits every variant alike
                times = run_once(directory, paths[variant], variant)
                first[variant].append(times[0])
                rest[variant].append(statistics.median(times[1:]))
    print(f"{args.tests} tests per pytest process, median of {args.runs} interleaved processes "
          f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"{'variant':<10} {'1st test (s)':>12} {'other tests (ms)':>16} {'vs':>10} "
          f"{'overhead/test (ms)':>18} {'ratio':>6}")
    med_first = {v: statistics.median(t) for v, t in first.items()}
    med_rest = {v: statistics.median(t) * 1000 for v, t in rest.items()}
    for variant in BODIES:
        base = AGAINST.get(variant)
        cells = f"{variant:<10} {med_first[variant]:>12.2f} {med_rest[variant]:>16.1f}"
        if base is None:
            print(cells)
            continue
        over = med_rest[variant] - med_rest[base]
        print(f"{cells} {base:>10} {over:>18.1f} {med_rest[variant] / med_rest[base]:>6.2f}")


if __name__ == "__main__":
    main()
