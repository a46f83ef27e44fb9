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
rounds of the mean step time (total of the N steps / N: the profiled steps count).

``--mechanisms`` prints instead, in one process, what one step of each loop costs under
each mechanism that could attribute memory to lines (interleaved, median of the rounds):
a no-op ``TorchFunctionMode`` (sees calls, not the storages made inside them), a no-op
``TorchDispatchMode`` (the floor of any per-op Python engine), ``torchmem.track(exact=True)``
(the storage engine), a profiled window of the line recorder (engine + line attribution),
and ``torch.profiler.profile(profile_memory=True)`` around the steps (C++ memory events,
with and without the processing of its results). Usage::

    python benchmarks/lines.py [--rounds 5] [--steps 200] [--loops mlp lstm_cell]
    python benchmarks/lines.py --mechanisms [--rounds 7]
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
from typing import Any

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


def mechanisms(rounds: int, steps: int = 10) -> None:
    """One step of each loop under each candidate mechanism, in this process."""
    import time
    from typing import Callable

    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    import torchmem
    from torchmem.collect.lines import LineRecorder
    from torchmem.collect.sites import SiteFinder

    class FnNoOp(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    class DispatchNoOp(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    def profiled(post: bool) -> Callable[[Callable[[], None]], None]:
        def run(step: Callable[[], None]) -> None:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                        profile_memory=True) as prof:
                for _ in range(steps):
                    step()
            if post:
                prof.key_averages()
        return run

    recorder = LineRecorder(SiteFinder())

    def lines(step: Callable[[], None]) -> None:
        for i in range(steps):
            recorder.begin(i + 1)
            step()
            recorder.end()

    def under(ctx: Callable[[], Any]) -> Callable[[Callable[[], None]], None]:
        def run(step: Callable[[], None]) -> None:
            with ctx():
                for _ in range(steps):
                    step()
        return run

    def plain(step: Callable[[], None]) -> None:
        for _ in range(steps):
            step()

    variants = {
        "plain": plain,
        "no-op TorchFunctionMode": under(FnNoOp),
        "no-op TorchDispatchMode": under(DispatchNoOp),
        "track(exact=True)": under(lambda: torchmem.track("cpu", exact=True)),
        "line recorder window": lines,
        "profiler, memory events": profiled(False),
        "profiler + key_averages()": profiled(True),
    }
    torch.set_num_threads(1)
    print(f"one training step under each mechanism, {steps} steps per round, median of "
          f"{rounds} interleaved rounds (ratio to plain)")
    recorder.install()
    try:
        for name, make in (("mlp", _mlp_step), ("lstm_cell", _lstm_step)):
            step = make()
            for run in variants.values():
                run(step)  # warm-up
            times: dict[str, list[float]] = {k: [] for k in variants}
            for _ in range(rounds):
                for k, run in variants.items():
                    t0 = time.perf_counter()
                    run(step)
                    times[k].append((time.perf_counter() - t0) / steps)
            base = statistics.median(times["plain"])
            print(f"\n{name} (plain {base * 1e3:.2f} ms/step)")
            for k, values in times.items():
                print(f"  {k:<28} {statistics.median(values) / base:>6.2f}x")
    finally:
        recorder.uninstall()


def _mlp_step() -> Any:
    """One step of ``workloads.mlp_loop`` (same model, batch and optimizer)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _lstm_step() -> Any:
    """One step of ``workloads.lstm_cell_loop``."""
    import torch

    torch.manual_seed(0)
    cell, head = torch.nn.LSTMCell(16, 32), torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=1e-2)
    seq, target = torch.randn(40, 8, 16), torch.randn(8, 1)

    def step() -> None:
        h, c = torch.zeros(8, 32), torch.zeros(8, 32)
        for x in seq:
            h, c = cell(x, (h, c))
        loss = torch.nn.functional.mse_loss(head(h), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--loops", nargs="+", default=["mlp", "lstm_cell"])
    parser.add_argument("--mechanisms", action="store_true",
                        help="compare the candidate mechanisms in one process instead")
    args = parser.parse_args()
    if args.mechanisms:
        mechanisms(args.rounds)
        return
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
