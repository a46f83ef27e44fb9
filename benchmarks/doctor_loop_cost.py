"""Cost of finding the repeating unit and the phases of a script (``torchmem doctor``).

Three in-process measurements, each timed with and without the mechanism, interleaved,
median over ``--trials``:

* ``loop tracer, tensor loop``: a loop of small tensor ops (an MLP-sized matmul, no
  module) under :class:`torchmem.doctor.loops.LoopTracer` (installed, with a no-op
  callback), the cost a script with no optimizer, backward or model pays for its steps;
* ``loop tracer, python calls``: the same loop calling a pure-Python helper 20 times per
  iteration (the tracer's global function runs once per Python call);
* ``eval pass forwards``: an MLP forward under ``no_grad`` with the evaluation-pass
  forward hooks of :class:`torchmem.doctor.steps.StepHooks` installed (torch's slow path
  for module calls), the cost of a forward during an evaluation pass.

A training script pays none of these per training step: the tracer is removed at its
first forward and the pass hooks only exist between ``model.eval()`` and the next
training step. Prints the load average with the numbers: on a shared machine they are
noise and must be measured again on a quiet one.

    python benchmarks/doctor_loop_cost.py --trials 5 --iterations 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from torchmem.doctor.loops import LoopTracer
from torchmem.doctor.steps import StepHooks, UserFrames


def _helper(x: float) -> float:
    return x * 1.0001


def tensor_loop(n: int, calls: int) -> float:
    a = torch.randn(64, 64)
    w = torch.randn(64, 64)
    t0 = time.perf_counter()
    for _ in range(n):
        a = torch.tanh(a @ w)
        v = 1.0
        for _ in range(calls):
            v = _helper(v)
    return (time.perf_counter() - t0) / n


def traced(n: int, calls: int) -> float:
    tracer = LoopTracer(UserFrames().is_user_file, os.path.dirname(torch.__file__),
                        lambda frame, changed: None)
    if not tracer.install():
        raise SystemExit("another tracer (debugger, coverage) is installed: cannot measure")
    try:
        return tensor_loop(n, calls)
    finally:
        tracer.uninstall()


def forwards(n: int, hooks: bool) -> float:
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    x = torch.randn(32, 64)
    step_hooks = StepHooks(lambda s, f: None, lambda n_, i: None, UserFrames(), loops=False,
                           on_pass_forward=lambda frame: None)
    with step_hooks:
        step_hooks._remove_forward_hooks()  # the run's own forward source: not measured here
        step_hooks.watch_forwards(hooks)
        with torch.no_grad():
            t0 = time.perf_counter()
            for _ in range(n):
                model(x)
            return (time.perf_counter() - t0) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()
    cases = {
        "loop tracer, tensor loop": (lambda: tensor_loop(args.iterations, 0),
                                     lambda: traced(args.iterations, 0)),
        "loop tracer, python calls": (lambda: tensor_loop(args.iterations, 20),
                                      lambda: traced(args.iterations, 20)),
        "eval pass forwards": (lambda: forwards(args.iterations, False),
                               lambda: forwards(args.iterations, True)),
    }
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    print("| case | without | with | ratio |")
    print("| --- | --- | --- | --- |")
    for name, (plain, measured) in cases.items():
        a, b = [], []
        for _ in range(args.trials):
            a.append(plain())
            b.append(measured())
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {name} | {ma * 1e6:.1f} us | {mb * 1e6:.1f} us | {mb / ma:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
